-- A key's rights were its permission list, an empty list meaning "everything":
-- a key written with a list lost by mistake (a bug, a hand-made row, a default)
-- got every right. Unrestricted is now its own column, and an empty list with
-- unrestricted false grants nothing (api.Principal.Can).
--
-- Every existing secret key with an empty list is a merchant's main key (made with
-- the merchant) and keeps every right; keys with a list stay restricted to it.
-- Public keys hold no permissions and are never unrestricted: what they may call
-- is decided by the routes that admit them, never by a permission check.
ALTER TABLE api_keys ADD COLUMN unrestricted boolean NOT NULL DEFAULT false;
UPDATE api_keys SET unrestricted = true WHERE kind = 'secret' AND permissions = '{}';
-- One shape per meaning: an unrestricted key is a secret key with no list, so
-- nothing can read "unrestricted, but only these" two ways.
ALTER TABLE api_keys ADD CONSTRAINT api_keys_unrestricted_shape
    CHECK (NOT unrestricted OR (kind = 'secret' AND permissions = '{}'));
