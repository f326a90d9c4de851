"""intasend-python 1.1.2's payment_links calls against a local paysvc (see harness.py).

    PAYSVC_BASE_URL=... PAYSVC_PUBLIC_KEY=... PAYSVC_SECRET_KEY=... .data/pysdk/bin/python links.py

Calls, in order:
  create       payment_links.create("Stall rent", "KES", 250, redirect_url=..., usage_limit=5)
  createOpen   payment_links.create("Harambee", "KES")  (amount 0: the payer names it)
  list         payment_links.retrieve()           GET paymentlinks/
  retrieve     payment_links.retrieve(id)         GET paymentlinks/{id} (no trailing slash)
  details      payment_links.details(id)
  deactivate   payment_links.deactivate()  and
  update       payment_links.update(): in 1.1.2 both take no argument and GET paymentlinks/,
               so they list the links and change nothing
  afterwards   payment_links.details(id), still active
  badCurrency  payment_links.create with a currency the service does not take (400)
  unknown      payment_links.details of a link that does not exist (404: returned)
"""

from harness import Harness, service

api = service()
h = Harness()

link = h.call("create", lambda: api.payment_links.create(
    "Stall rent", "KES", 250, redirect_url="https://shop.example/thanks", usage_limit=5))
h.call("createOpen", lambda: api.payment_links.create("Harambee", "KES"))
h.call("list", lambda: api.payment_links.retrieve())
lid = link["id"] if link else "00000000-0000-0000-0000-000000000000"
h.call("retrieve", lambda: api.payment_links.retrieve(lid))
h.call("details", lambda: api.payment_links.details(lid))
h.call("deactivate", lambda: api.payment_links.deactivate())
h.call("update", lambda: api.payment_links.update())
h.call("afterwards", lambda: api.payment_links.details(lid))
h.call("badCurrency", lambda: api.payment_links.create("Gold", "XAU", 1))
h.call("unknown", lambda: api.payment_links.details("00000000-0000-0000-0000-000000000000"))
h.finish()
