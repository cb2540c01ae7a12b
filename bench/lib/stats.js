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

const percentiles = (values) => ({
  p50: round(quantile(values, 0.5)),
  p90: round(quantile(values, 0.9)),
  p99: round(quantile(values, 0.99)),
  max: round(values.reduce((a, b) => (b > a ? b : a), -Infinity)),
});

module.exports = { sum, round, sorted, quantile, median, spread, percentiles };
