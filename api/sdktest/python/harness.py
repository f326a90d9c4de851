"""Runs intasend-python 1.1.2 calls against a local paysvc, one after another.

The SDK has no base-URL option: every request's URL comes from the module function
intasend.client.get_service_url(endpoint, test). This module replaces that one
function, so the calls go to PAYSVC_BASE_URL, and changes nothing else: headers,
bodies, paths (with or without their trailing slash) and error handling are the
SDK's own.

A script calls h.call(name, fn) for each SDK call and h.finish() at the end, which
prints ONE JSON object on stdout keyed by call name. A call's entry is what the SDK
returned (its parsed JSON body, whatever the status: the SDK raises on 400, 401,
403 and 500 only), or, when it raised:

    {"error": "<str(exception)>", "rejected_with": "<exception class>"}

For the SDK's own exceptions (IntaSendBadRequest, IntaSendUnauthorized,
IntaSendNotAllowed, IntaSendServerError) the text is the server's response body.
The keys are those harness.js writes, so the Go tests read both with one decoder.

Exit 0 when every call returned or raised; exit 1 with "pending": [name] when a
call is still open after the time limit (requests has no timeout of its own).

Environment: PAYSVC_BASE_URL, PAYSVC_PUBLIC_KEY, PAYSVC_SECRET_KEY.
"""

import json
import os
import signal
import sys
import time

import intasend
import intasend.client

BASE_URL = os.environ["PAYSVC_BASE_URL"].rstrip("/")


def service_url(service_endpoint, test=False):
    # Same signature and the same "/api/v1/" join as the SDK's; only the host differs.
    return f"{BASE_URL}/api/v1/{service_endpoint}"


intasend.client.get_service_url = service_url


def service(token=None, publishable_key=None):
    """An APIService with the merchant's keys (or the ones given), in test mode."""
    return intasend.APIService(
        token=token or os.environ["PAYSVC_SECRET_KEY"],
        publishable_key=publishable_key or os.environ["PAYSVC_PUBLIC_KEY"],
        test=True,
    )


class Harness:
    def __init__(self, timeout_s=30):
        self.results = {}
        self.current = None
        signal.signal(signal.SIGALRM, self._pending)
        signal.alarm(timeout_s)

    def _pending(self, signum, frame):
        self.results["pending"] = [self.current]
        sys.stderr.write(f"still pending: {self.current}\n")
        self._print()
        os._exit(1)

    def call(self, name, fn):
        """Runs fn, records its result under name and returns it (None if it raised)."""
        self.current = name
        try:
            out = self.results[name] = fn()
        except Exception as e:  # the SDK's exceptions and anything requests raises
            self.results[name] = {"error": str(e), "rejected_with": type(e).__name__}
            out = None
        self.current = None
        return out

    def skip(self, name, why):
        self.results[name] = {"error": f"skipped: {why}", "rejected_with": "skipped"}

    def _print(self):
        sys.stdout.write(json.dumps(self.results, indent=2) + "\n")
        sys.stdout.flush()

    def finish(self):
        signal.alarm(0)
        self._print()
        sys.exit(0)


def until(fn, done, tries=100, pause_s=0.1):
    """Calls fn until done(result) holds, as an SDK user polls a status call."""
    for _ in range(tries):
        out = fn()
        if done(out):
            return out
        time.sleep(pause_s)
    raise RuntimeError(f"not final after {tries} polls: {out}")
