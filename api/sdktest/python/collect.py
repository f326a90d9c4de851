"""intasend-python 1.1.2's collect calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \\
    PAYSVC_PHONE=2547XXXXXXXX .data/pysdk/bin/python collect.py

Calls, in order:
  quote        collect.get_quote(1000, "M-PESA")  (the tariff under the SDK's "tarrif")
  quoteCard    collect.get_quote(1234.56, "CARD-PAYMENT", tarrif="CUSTOMER-PAYS")
  quoteUSD     collect.get_quote(10, "M-PESA", currency="USD", tarrif="CUSTOMER-PAYS")
  stkPush      collect.mpesa_stk_push(phone, 1000, narrative, name=, email=)
  status       collect.status(invoice_id)  (public key alone: the SDK's noauth call)
  statusLater  the same, polled until the invoice is final
  checkout     collect.checkout(email, 150, "KES", ...)  (public key alone, version "3.0.0")
  statusSig    the checkout paid as its hosted page pays, then
               collect.status(invoice_id, checkout_id, signature)
  statusUnknown collect.status of an invoice that does not exist (404: returned, not raised)
  badAmount    collect.mpesa_stk_push with a negative amount (400: IntaSendBadRequest)
  wrongSecret  collect.get_quote with an unknown secret key (401: IntaSendUnauthorized)
"""

import os

import requests

from harness import BASE_URL, Harness, service, until

phone = os.environ["PAYSVC_PHONE"]
api = service()
h = Harness()
final = lambda s: s["invoice"]["state"] in ("COMPLETE", "FAILED")

h.call("quote", lambda: api.collect.get_quote(amount=1000, method="M-PESA"))
h.call("quoteCard", lambda: api.collect.get_quote(1234.56, "CARD-PAYMENT", tarrif="CUSTOMER-PAYS"))
h.call("quoteUSD", lambda: api.collect.get_quote(10, "M-PESA", currency="USD", tarrif="CUSTOMER-PAYS"))
push = h.call("stkPush", lambda: api.collect.mpesa_stk_push(
    phone_number=phone, amount=1000, narrative="py order", api_ref="py-order-1",
    name="Amina Odhiambo", email="amina@example.com"))
invoice = push["invoice"]["invoice_id"] if push else None
h.call("status", lambda: api.collect.status(invoice))
h.call("statusLater", lambda: until(lambda: api.collect.status(invoice), final))

co = h.call("checkout", lambda: api.collect.checkout(
    email="buyer@example.com", amount=150, currency="KES", api_ref="py-checkout-1",
    first_name="Baraka", last_name="Mwangi", phone_number=phone, comment="two seats",
    redirect_url="https://shop.example/thanks"))


def pay_and_ask():
    # The hosted page's own call, outside the SDK (which has no call for it).
    r = requests.post(f"{BASE_URL}/api/v1/payment/collection/", json={
        "method": "M-PESA", "currency": "KES", "amount": "150", "api_ref": "py-checkout-1",
        "phone_number": phone, "checkout_id": co["id"], "signature": co["signature"]})
    r.raise_for_status()
    paid = r.json()["invoice"]["invoice_id"]
    return until(lambda: api.collect.status(paid, co["id"], co["signature"]), final)


if co:
    h.call("statusSig", pay_and_ask)
else:
    h.skip("statusSig", "checkout failed")
h.call("statusUnknown", lambda: api.collect.status("NOSUCHINVOICE"))
h.call("badAmount", lambda: api.collect.mpesa_stk_push(phone_number=phone, amount=-5, narrative="bad"))
h.call("wrongSecret", lambda: service(token="ISSecretKey_test_" + "x" * 32).collect.get_quote(100, "M-PESA"))
h.finish()
