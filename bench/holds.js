// Requests held until the bench releases them, shared by both apps under test (no dependencies).
// `hold(key)` resolves when `release(key)` is called (or at once if it already was) and returns
// the moment the handler completed, as a high-resolution epoch in ms: the wait-mode scenario
// compares it with the moment each waiter receives the replay (same clock: performance.timeOrigin
// is the wall clock at process start, performance.now() counts from it, in both processes).
const { performance } = require('node:perf_hooks');

const now = () => performance.timeOrigin + performance.now();
const waiting = new Map(); // key -> resolve of the held handler
const started = new Map(); // key -> resolvers of `whenHeld`
const released = new Set(); // released before the handler got there

async function hold(key) {
  if (released.delete(key)) return { held: key, completedAt: now() };
  await new Promise((resolve) => {
    waiting.set(key, resolve);
    (started.get(key) ?? []).forEach((notify) => notify());
    started.delete(key);
  });
  return { held: key, completedAt: now() };
}

function release(key) {
  const resolve = waiting.get(key);
  if (!resolve) return (released.add(key), false);
  waiting.delete(key);
  resolve();
  return true;
}

/** Resolves once a handler is holding `key`: the claim is then certainly taken. */
const whenHeld = (key) =>
  waiting.has(key)
    ? Promise.resolve(true)
    : new Promise((resolve) => started.set(key, [...(started.get(key) ?? []), resolve]));

module.exports = { hold, release, whenHeld, now };
