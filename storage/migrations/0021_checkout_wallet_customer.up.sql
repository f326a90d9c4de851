-- Checkout sessions keep what the merchant said when creating them (issue 12): the
-- wallet their money goes to (NULL: the merchant's KES settlement wallet), where the
-- hosted page sends the payer afterwards, and the customer details the SDKs send,
-- which every payment through the session carries. Existing sessions keep NULLs:
-- they were created without these fields (or had them dropped), and paying them
-- goes on as before.
ALTER TABLE checkouts
    ADD COLUMN wallet_id    text,
    ADD COLUMN redirect_url text,
    ADD COLUMN phone_number text,
    ADD COLUMN first_name   text,
    ADD COLUMN last_name    text,
    ADD COLUMN country      text,
    ADD COLUMN zipcode      text,
    ADD COLUMN address      text,
    ADD COLUMN city         text,
    ADD COLUMN state        text,
    ADD COLUMN comment      text;
