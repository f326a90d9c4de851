'use strict';
// Preload: node -r ./redirect.js script.js
//
// intasend-node has no base-URL option: it always calls https.request() against
// sandbox.intasend.com / payment.intasend.com on port 443. This wraps https.request
// and https.get so that every HTTPS request goes instead over plain HTTP to
// PAYSVC_BASE_URL (e.g. http://127.0.0.1:18080). Method, path, headers and the
// body the caller writes are passed through untouched; only the destination
// (protocol, hostname, port, and therefore the Host header) changes.
// An optional path prefix in PAYSVC_BASE_URL (http://h:p/prefix) is prepended.
// PAYSVC_REDIRECT_DEBUG=1 logs each rerouted request to stderr.

const http = require('http');
const https = require('https');

const raw = process.env.PAYSVC_BASE_URL;
if (!raw) {
  // Fail loudly rather than silently sending real keys to the real service.
  throw new Error('redirect.js: PAYSVC_BASE_URL is not set (e.g. http://127.0.0.1:18080)');
}
const base = new URL(raw);
if (base.protocol !== 'http:') {
  throw new Error(`redirect.js: PAYSVC_BASE_URL must be http://, got ${raw}`);
}
const prefix = base.pathname.replace(/\/+$/, ''); // '' for "http://h:p" or "http://h:p/"
const debug = process.env.PAYSVC_REDIRECT_DEBUG === '1';

// Normalise https.request(options[, cb]) and https.request(url[, options][, cb]).
function normalise(args) {
  let [a, b, c] = args;
  let opts = {};
  if (typeof a === 'string' || a instanceof URL) {
    const u = typeof a === 'string' ? new URL(a) : a;
    opts = {
      protocol: u.protocol,
      hostname: u.hostname,
      port: u.port,
      path: `${u.pathname}${u.search}`,
    };
    if (u.username || u.password) {
      opts.auth = `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`;
    }
    if (typeof b === 'function') {
      c = b;
      b = undefined;
    }
    if (b) opts = Object.assign(opts, b);
  } else {
    opts = Object.assign({}, a);
    c = b;
  }
  return { opts, cb: typeof c === 'function' ? c : undefined };
}

function reroute(opts) {
  const from = `https://${opts.hostname || opts.host || 'localhost'}:${opts.port || 443}${opts.path || '/'}`;
  const out = Object.assign({}, opts, {
    protocol: 'http:',
    hostname: base.hostname.replace(/^\[|\]$/g, ''), // strip IPv6 brackets
    port: base.port || 80,
    path: prefix + (opts.path || '/'),
  });
  delete out.host; // hostname wins, but drop the original to avoid confusion
  // An https.Agent cannot carry an http: request; fall back to http.globalAgent.
  if (out.agent instanceof https.Agent) delete out.agent;
  delete out._defaultAgent;
  delete out.defaultPort;
  if (debug) {
    process.stderr.write(`[redirect] ${out.method || 'GET'} ${from} -> http://${out.hostname}:${out.port}${out.path}\n`);
  }
  return out;
}

https.request = function request(...args) {
  const { opts, cb } = normalise(args);
  return http.request(reroute(opts), cb);
};

https.get = function get(...args) {
  const req = https.request(...args);
  req.end();
  return req;
};
