// The reference JS Agent Protocol SDK's minimal agent (npm agent-protocol
// 1.0.5, pinned in package.json): every step answers with its own input.
// It is agentrt's baseline in bench/run.sh.
//
//   PORT=8000 HOST=127.0.0.1 node agent.js
//
// Environment:
//   PORT       port to listen on (default 8000; 0 picks a free one)
//   HOST       address to listen on (default 127.0.0.1)
//   WORKSPACE  the SDK's artifact directory (default $TMPDIR/agent-protocol-js-workspace;
//              the benchmarks upload no artifacts, so nothing is written there)
//
// When it listens it prints one line to stderr with url=http://HOST:PORT/ap/v1,
// in the same form as agentrt, so bench/run.sh finds the port the same way.
//
// API notes (from node_modules/agent-protocol/dist/index.d.ts, which differs
// from the package README): the task handler is called as (taskId, input) and
// returns the step handler; the step handler is called with the step request's
// `input` (a string or null) and returns {output, name?, is_last?, artifacts?}.
// Agent.handleTask(handler, config) needs a config object (it reads
// config.workspace). We call .build() and listen ourselves instead of
// .start(port): .start() does exactly app.listen(port) on all interfaces and
// logs the configured port, not the bound one, so port 0 could not be reported.
'use strict';

const os = require('os');
const path = require('path');
const Agent = require('agent-protocol').default;

const port = Number(process.env.PORT ?? 8000);
const host = process.env.HOST || '127.0.0.1';
const workspace = process.env.WORKSPACE || path.join(os.tmpdir(), 'agent-protocol-js-workspace');

if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`agent.js: bad PORT ${JSON.stringify(process.env.PORT)}`);
  process.exit(2);
}

async function taskHandler(taskId, taskInput) {
  async function stepHandler(stepInput) {
    return { output: stepInput };
  }
  return stepHandler;
}

const app = Agent.handleTask(taskHandler, { port, workspace }).build(port);
const server = app.listen(port, host, () => {
  const a = server.address();
  const version = require('agent-protocol/package.json').version;
  console.error(`agent-protocol JS SDK ${version} serving url=http://${a.address}:${a.port}/ap/v1 node=${process.version}`);
});
server.on('error', (err) => {
  console.error(`agent.js: cannot listen on ${host}:${port}: ${err.message}`);
  process.exit(1);
});
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => process.exit(0));
}
