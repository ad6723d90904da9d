-- summary: nodes record their last decryption failure's reason and whether their device is cross-signed
--
-- Each node reports why its last undecryptable event was not decrypted and whether its device
-- is cross-signed (docs/architecture.md §12), for `!dag nodes`. Nullable: a node of an older
-- schema's release writes neither.

ALTER TABLE nodes ADD COLUMN undecryptable_reason text;
ALTER TABLE nodes ADD COLUMN device_signed boolean;
