-- Approving a payment file becomes its own permission (approve_files), apart from
-- change_files (cancel). Until now change_files approved files too, so every key that
-- holds it keeps that right: a deploy must not silently take away what a merchant's
-- running integration uses. Keys issued from now on must ask for approve_files.
UPDATE api_keys SET permissions = array_append(permissions, 'approve_files')
WHERE 'change_files' = ANY (permissions) AND NOT 'approve_files' = ANY (permissions);
