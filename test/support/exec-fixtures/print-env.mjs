// Test fixture: prints its whole environment as JSON, to prove what the executor passes on.
import process from "node:process";
process.stdout.write(JSON.stringify(process.env));
