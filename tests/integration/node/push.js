// Runs the real @pyroscope/nodejs agent against a Hearth server for a few seconds
// with a CPU- and memory-hungry workload, then stops (flushing its last profiles).
// Usage: HEARTH_URL=http://127.0.0.1:PORT SECONDS=8 node push.js
const Pyroscope = require('@pyroscope/nodejs');

Pyroscope.init({
  serverAddress: process.env.HEARTH_URL,
  appName: 'node-agent-test',
  tags: { env: 'ci', region: 'local' },
  flushIntervalMs: 2000,
  wall: { collectCpuTime: true },
});
Pyroscope.start();

const keep = [];
function busyMath() {
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += Math.sqrt(i) * Math.sin(i);
  return x;
}
function allocate() {
  keep.push(new Array(2e4).fill(Math.random()));
  if (keep.length > 200) keep.splice(0, 100);
}
const timer = setInterval(() => { busyMath(); allocate(); }, 5);
setTimeout(async () => {
  clearInterval(timer);
  await Pyroscope.stop();
  process.exit(0);
}, Number(process.env.SECONDS || 8) * 1000);
