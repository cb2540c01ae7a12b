// Small statistics for the bench: medians and min-max of rounds, percentiles of latencies.

const sum = (values) => values.reduce((a, b) => a + b, 0);
const round = (value, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;
const sorted = (values) => [...values].sort((a, b) => a - b);

/** The q-quantile (0..1) of `values`, nearest rank. */
const quantile = (values, q) => {
  const s = sorted(values);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};

const median = (values) => {
  const s = sorted(values);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};

/** Median with the min and max, of the finite values only; undefined when none is finite. */
const spread = (values, digits = 3) => {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return undefined;
  return {
    median: round(median(finite), digits),
    min: round(
      finite.reduce((a, b) => (b < a ? b : a)),
      digits,
    ),
    max: round(
      finite.reduce((a, b) => (b > a ? b : a)),
      digits,
    ),
  };
};

/**
 * p50, p90, p99 and max of `values`, sorted as a Float64Array (a native numeric sort): the run()
 * lanes compute it in the process under test, inside its CPU window, over 100 000 latencies.
 */
const percentiles = (values) => {
  const s = Float64Array.from(values).sort();
  const at = (q) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return {
    p50: round(at(0.5)),
    p90: round(at(0.9)),
    p99: round(at(0.99)),
    max: round(s[s.length - 1]),
  };
};

module.exports = { sum, round, sorted, quantile, median, spread, percentiles };
