-- Retention (docs/retention.md). A processed command keeps its row forever (it is
-- the dedupe set that makes a command apply at most once), but its stored reply is
-- emptied after PAYSVC_COMMAND_REPLY_RETENTION: replies of large payment files run to
-- megabytes and are only read by retries. This index finds the replies still kept.
CREATE INDEX processed_commands_kept_reply ON processed_commands (processed_at) WHERE octet_length(reply) > 0;
