'use strict';
// Drives intasend-node@1.1.2's wallets() calls against a local paysvc.
//
//   PAYSVC_BASE_URL=http://127.0.0.1:18080 PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \
//   PAYSVC_SOURCE_WALLET=<wallet_id with funds> [PAYSVC_LABEL=...] [PAYSVC_AMOUNT=10] \
//   node -r ./redirect.js wallets.js
//
// Prints ONE JSON object on stdout: each call's resolved value, or {error: "..."}
// with what the SDK rejected with. Exit 0 when every call settled (even with
// errors); exit 1 if a call is still pending after 20s (the object then has
// "pending": [name]). The SDK leaves a promise pending forever when an error
// response has an empty body, and throws (uncaught) when a 200/201 body is not
// JSON; the latter is recorded as that call's error.

const IntaSend = require('intasend-node');

const pub = process.env.PAYSVC_PUBLIC_KEY;
const secret = process.env.PAYSVC_SECRET_KEY;
const label = process.env.PAYSVC_LABEL || 'SDK-WALLET-1';
const source = process.env.PAYSVC_SOURCE_WALLET;
const amount = Number(process.env.PAYSVC_AMOUNT || 10); // a JSON number, as integrators pass it

const intasend = new IntaSend(pub, secret, true);
const results = {};
let current = null;
let crash = null;

function finish(code) {
  process.stdout.write(JSON.stringify(results, null, 2) + '\n');
  process.exit(code);
}

// The SDK rejects with a Buffer (first chunk of an error body), a string
// (socket error message) or an Error (e.g. thrown while building the request).
function describe(err) {
  if (Buffer.isBuffer(err)) return err.toString('utf8');
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return typeof err === 'string' ? err : JSON.stringify(err);
}

// JSON.parse of a non-JSON success body throws inside the SDK's 'end' handler.
process.on('uncaughtException', (err) => {
  if (crash) return crash(new Error(`uncaught in SDK: ${err.message}`));
  results.fatal = { error: describe(err) };
  finish(1);
});

async function call(name, fn) {
  current = name;
  const crashed = new Promise((_, reject) => { crash = reject; });
  try {
    results[name] = await Promise.race([fn(), crashed]);
  } catch (err) {
    results[name] = { error: describe(err) };
  }
  current = crash = null;
  return results[name];
}

const skip = (why) => () => Promise.reject(`skipped: ${why}`);

setTimeout(() => {
  results.pending = [current];
  process.stderr.write(`still pending after 20s: ${current}\n`);
  finish(1);
}, 20000);

(async () => {
  await call('list', () => intasend.wallets().list());
  const created = await call('create', () => intasend.wallets().create({
    label, wallet_type: 'WORKING', currency: 'KES', can_disburse: true,
  }));
  const id = created && created.wallet_id;
  const noId = skip('create returned no wallet_id');

  await call('get', id ? () => intasend.wallets().get(id) : noId);
  // SDK signature: intraTransfer(sourceID, destinationID, amount, narrative)
  //   -> POST /api/v1/wallets/{sourceID}/intra_transfer/ {wallet_id: destinationID, amount, narrative}
  await call('intraTransfer', !source ? skip('PAYSVC_SOURCE_WALLET not set') : id
    ? () => intasend.wallets().intraTransfer(source, id, amount, 'sdk transfer') : noId);
  await call('transactions', id ? () => intasend.wallets().transactions(id) : noId);
  // Back-to-back GETs: each carries an unframed body (see SDK-NOTES.md).
  await call('get#2', id ? () => intasend.wallets().get(id) : noId);
  await call('get#3', id ? () => intasend.wallets().get(id) : noId);
  finish(0);
})();
