-- Where operational mail about a merchant goes (the webhook failure warning): set
-- with `paysvc merchant create --email` or `paysvc merchant email`. NULL: the
-- operator's address (PAYSVC_MAIL_FROM) gets it instead.
ALTER TABLE merchants ADD COLUMN email text;
