"""intasend-python 1.1.2's transfer calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \\
    PAYSVC_RECIPIENT_WALLET=<another merchant's wallet> PAYSVC_WORKING_WALLET=<a funded WORKING wallet> \
    .data/pysdk/bin/python transfers.py

Calls, in order (amounts and B2B accounts are JSON numbers, as SDK users pass them):
  mpesa        transfer.mpesa("KES", [2 recipients])  requires_approval "YES" (the default)
  approve      transfer.approve(<the whole mpesa response>)
  approveAgain the same again (400: IntaSendBadRequest)
  mpesaStatus  transfer.status(tracking_id), polled until the file is final
  b2b, bank, p2p, airtime
               transfer.mpesa_b2b / bank / intasend / airtime with requires_approval="NO",
               each followed by <name>Status, polled until final; airtime is paid from
               PAYSVC_WORKING_WALLET (the SDK's wallet_id), the others from the settlement wallet
  sendMoney    transfer.send_money("MPESA-B2C", ...), the call the others wrap, left for approval
  bankCodes    transfer.get_bank_codes()  (public key alone, GET with a "{}" body)
  badAmount    transfer.mpesa with a negative amount (400: IntaSendBadRequest)
  unknownStatus transfer.status of a tracking id that does not exist (404: returned)
  airtimeNone  transfer.airtime() without transactions: the SDK raises ValueError itself
"""

import os

from harness import Harness, service, until

recipient = os.environ["PAYSVC_RECIPIENT_WALLET"]
working = os.environ["PAYSVC_WORKING_WALLET"]
api = service()
h = Harness(timeout_s=50)
final = lambda f: f.get("status") in ("COMPLETE", "FAILED", "CANCELLED")


def poll(name, started):
    if started and "tracking_id" in started:
        h.call(name, lambda: until(lambda: api.transfer.status(started["tracking_id"]), final, tries=300))
    else:
        h.skip(name, "the file was not created")


mpesa = h.call("mpesa", lambda: api.transfer.mpesa("KES", [
    {"name": "Amina", "account": "254708374149", "amount": 1000, "narrative": "salary"},
    {"name": "Nobody", "account": "254712340011", "amount": 250, "narrative": "salary"},
]))
h.call("approve", lambda: api.transfer.approve(mpesa))
h.call("approveAgain", lambda: api.transfer.approve(mpesa))
poll("mpesaStatus", mpesa)

started = {
    "b2b": lambda: api.transfer.mpesa_b2b("KES", [
        {"name": "Power Co", "account": 888880, "account_type": "PayBill", "account_reference": "ACC-1",
         "amount": 2000}], requires_approval="NO"),
    "bank": lambda: api.transfer.bank("KES", [
        {"name": "Baraka", "account": "1234567890", "bank_code": "11", "amount": "2500.50",
         "narrative": "rent"}], requires_approval="NO"),
    "p2p": lambda: api.transfer.intasend("KES", [
        {"account": recipient, "amount": 750.25, "narrative": "share"}], requires_approval="NO"),
    "airtime": lambda: api.transfer.airtime("KES", [
        {"name": "Amina", "account": "254722000111", "amount": 50}], requires_approval="NO", wallet_id=working),
}
for name, start in started.items():
    poll(name + "Status", h.call(name, start))

h.call("sendMoney", lambda: api.transfer.send_money("MPESA-B2C", "KES", [
    {"name": "Later", "account": "254708374149", "amount": 100}]))
h.call("bankCodes", lambda: api.transfer.get_bank_codes())
h.call("badAmount", lambda: api.transfer.mpesa("KES", [{"name": "X", "account": "254708374149", "amount": -1}]))
h.call("unknownStatus", lambda: api.transfer.status("NOSUCHFILE"))
h.call("airtimeNone", lambda: api.transfer.airtime())
h.finish()
