"""intasend-python 1.1.2's customers calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... \\
    PAYSVC_PHONE=... .data/pysdk/bin/python customers.py

Calls, in order:
  create       customers.create(email, first_name=, last_name=, phone_number=, country=)
  list         customers.retrieve()                  GET customers/
  retrieve     customers.retrieve(id)                GET customers/{id} (no trailing slash)
  details      customers.details(id)
  pay          collect.mpesa_stk_push from the customer's email, polled until final
  transactions customers.transactions(id)            GET customers/{id}/transactions (no slash)
  badEmail     customers.create with an email that is not one (400: IntaSendBadRequest)
  unknown      customers.details of a customer that does not exist (404: returned)
"""

import os

from harness import Harness, service, until

phone = os.environ["PAYSVC_PHONE"]
api = service()
h = Harness()

cust = h.call("create", lambda: api.customers.create(
    "wanjiku@example.com", first_name="Wanjiku", last_name="Kamau", phone_number="+254711000001",
    country="KE"))
cid = cust["customer_id"] if cust else "NOSUCHCUSTOMER"
h.call("list", lambda: api.customers.retrieve())
h.call("retrieve", lambda: api.customers.retrieve(cid))
h.call("details", lambda: api.customers.details(cid))


def pay():
    push = api.collect.mpesa_stk_push(phone_number=phone, amount=120, narrative="order",
                                      email="wanjiku@example.com", api_ref="py-customer-1")
    return until(lambda: api.collect.status(push["invoice"]["invoice_id"]),
                 lambda s: s["invoice"]["state"] in ("COMPLETE", "FAILED"))


h.call("pay", pay)
h.call("transactions", lambda: api.customers.transactions(cid))
h.call("badEmail", lambda: api.customers.create("not-an-email"))
h.call("unknown", lambda: api.customers.details("NOSUCHCUSTOMER"))
h.finish()
