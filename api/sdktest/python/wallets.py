"""intasend-python 1.1.2's wallets calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \\
    PAYSVC_SOURCE_WALLET=<a funded KES wallet> PAYSVC_LABEL=... PAYSVC_PHONE=... \\
    .data/pysdk/bin/python wallets.py

Calls, in order:
  list         wallets.retrieve()               GET wallets/
  create       wallets.create("KES", label, can_disburse=True)
  retrieve     wallets.retrieve(id)             GET wallets/{id} (no trailing slash)
  details      wallets.details(id)
  intraTransfer wallets.intra_transfer(source, id, 10, narrative)  (amount a JSON number)
  transactions wallets.transactions(id)         GET wallets/{id}/transactions (no slash)
  fundLink     wallets.fund(id, ..., 500, mode="LINK"): a checkout for the wallet
  fundStk      wallets.fund(id, ..., 300, mode="MPESA-STK-PUSH"): an STK push into it
  fundStkLater the push's invoice, polled with collect.status until final
  detailsAfter wallets.details(id) after the push completed
  overdraw     intra_transfer of 306.00 from id, which holds 305.50 (400: IntaSendBadRequest)
  unknown      wallets.details of a wallet that does not exist (404: returned, not raised)
  wrongSecret  wallets.retrieve() with an unknown secret key (401: IntaSendUnauthorized)
  viewList     wallets.retrieve() with the other merchant's key: its own wallets only
  viewCreate   wallets.create with that key, which may not add wallets (403: IntaSendNotAllowed)
"""

import os

from harness import Harness, service, until

source = os.environ["PAYSVC_SOURCE_WALLET"]
phone = os.environ["PAYSVC_PHONE"]
api = service()
h = Harness()

h.call("list", lambda: api.wallets.retrieve())
created = h.call("create", lambda: api.wallets.create("KES", os.environ["PAYSVC_LABEL"], can_disburse=True))
wid = created["wallet_id"] if created else "NOWALLET"
h.call("retrieve", lambda: api.wallets.retrieve(wid))
h.call("details", lambda: api.wallets.details(wid))
h.call("intraTransfer", lambda: api.wallets.intra_transfer(source, wid, 10, "py transfer"))
h.call("transactions", lambda: api.wallets.transactions(wid))
h.call("fundLink", lambda: api.wallets.fund(
    wallet_id=wid, phone_number=phone, email="topup@example.com", amount=500, narrative="top up"))
push = h.call("fundStk", lambda: api.wallets.fund(
    wallet_id=wid, phone_number=phone, email="topup@example.com", amount=300, narrative="top up",
    mode="MPESA-STK-PUSH", api_ref="py-fund-1"))
if push:
    h.call("fundStkLater", lambda: until(lambda: api.collect.status(push["invoice"]["invoice_id"]),
                                         lambda s: s["invoice"]["state"] in ("COMPLETE", "FAILED")))
else:
    h.skip("fundStkLater", "fundStk failed")
h.call("detailsAfter", lambda: api.wallets.details(wid))
h.call("overdraw", lambda: api.wallets.intra_transfer(wid, source, "306.00", "too much"))
h.call("unknown", lambda: api.wallets.details("NOSUCHWALLET"))
h.call("wrongSecret", lambda: service(token="ISSecretKey_test_" + "x" * 32).wallets.retrieve())
viewer = service(token=os.environ["PAYSVC_VIEW_SECRET_KEY"], publishable_key=os.environ["PAYSVC_VIEW_PUBLIC_KEY"])
h.call("viewList", lambda: viewer.wallets.retrieve())
h.call("viewCreate", lambda: viewer.wallets.create("KES", "not allowed"))
h.finish()
