"""intasend-python 1.1.2's chargebacks calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \\
    PAYSVC_INVOICE=<a COMPLETE invoice> .data/pysdk/bin/python chargebacks.py

Calls, in order:
  create       chargebacks.create(invoice, 200, reason, reason_details)  (amount a JSON number)
  list         chargebacks.retrieve()         GET chargebacks/ (with a "{}" body)
  retrieve     chargebacks.retrieve(id)       GET chargebacks/{id}/
  details      chargebacks.details(id)
  tooMuch      chargebacks.create above what the invoice has left (400: IntaSendBadRequest)
  unknown      chargebacks.details of an id that does not exist (404: returned, not raised)
"""

import os

from harness import Harness, service

invoice = os.environ["PAYSVC_INVOICE"]
api = service()
h = Harness()

created = h.call("create", lambda: api.chargebacks.create(
    invoice=invoice, amount=200, reason="Unavailable service", reason_details="Service unavailable"))
h.call("list", lambda: api.chargebacks.retrieve())
if created:
    h.call("retrieve", lambda: api.chargebacks.retrieve(created["id"]))
    h.call("details", lambda: api.chargebacks.details(created["id"]))
else:
    h.skip("retrieve", "create failed")
    h.skip("details", "create failed")
h.call("tooMuch", lambda: api.chargebacks.create(invoice=invoice, amount=100000, reason="Other",
                                                 reason_details="too much"))
h.call("unknown", lambda: api.chargebacks.details(999999999))
h.finish()
