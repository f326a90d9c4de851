'use strict';
// Shared by wallets.js and errors.js: runs intasend-node calls one after another and
// prints ONE JSON object on stdout, keyed by call name. A call's entry is what the
// SDK resolved with, or, when it rejected:
//
//   {"error": "<text>", "rejected_with": "Buffer"|"string"|"Error", "status": <int|null>}
//
// "Buffer" is the first chunk of an HTTP error body (the SDK does not parse it);
// "string" a socket error message; "Error" something thrown while sending.
// "status" is the HTTP status of an error response, taken from the line the SDK
// itself logs (console.error("IntaSend Request HTTP Error Code: NNN")).
//
// Exit 0 when every call settled (even with errors); exit 1 with "pending": [name]
// if a call is still open after timeoutMs (the SDK never settles an error response
// with an empty body). A non-JSON 200/201 body makes the SDK throw, uncaught, inside
// its 'end' handler; that is recorded as the call's error and the run goes on.

function describe(err) {
  if (Buffer.isBuffer(err)) return err.toString('utf8');
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return typeof err === 'string' ? err : JSON.stringify(err);
}

function kind(err) {
  if (Buffer.isBuffer(err)) return 'Buffer';
  if (err instanceof Error) return 'Error';
  return typeof err;
}

function harness({ timeoutMs = 20000 } = {}) {
  const results = {};
  let current = null;
  let crash = null;
  let status = null;

  const logError = console.error.bind(console);
  console.error = (...args) => {
    const m = /^IntaSend Request HTTP Error Code: (\d+)/.exec(String(args[0]));
    if (m) status = Number(m[1]);
    logError(...args);
  };

  function finish(code) {
    process.stdout.write(JSON.stringify(results, null, 2) + '\n');
    process.exit(code);
  }

  process.on('uncaughtException', (err) => {
    if (crash) return crash(new Error(`uncaught in SDK: ${err.message}`));
    results.fatal = { error: describe(err), rejected_with: kind(err) };
    finish(1);
  });

  setTimeout(() => {
    results.pending = [current];
    process.stderr.write(`still pending after ${timeoutMs / 1000}s: ${current}\n`);
    finish(1);
  }, timeoutMs); // not unref'd: it keeps the process alive while a promise hangs

  async function call(name, fn) {
    current = name;
    status = null;
    const crashed = new Promise((_, reject) => { crash = reject; });
    try {
      results[name] = await Promise.race([fn(), crashed]);
    } catch (err) {
      results[name] = { error: describe(err), rejected_with: kind(err), status };
    }
    current = crash = null;
    return results[name];
  }

  const skip = (why) => () => Promise.reject(`skipped: ${why}`);

  return { call, finish, skip, results };
}

module.exports = { harness };
