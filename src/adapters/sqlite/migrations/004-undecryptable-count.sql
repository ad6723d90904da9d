-- summary: nodes count the encrypted events they could not decrypt
--
-- Each node reports how many encrypted events it could not decrypt (`!dag nodes`).

ALTER TABLE nodes ADD COLUMN undecryptable INTEGER NOT NULL DEFAULT 0;
