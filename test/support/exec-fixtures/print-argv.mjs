// Test fixture: prints the arguments it received as one JSON array, to prove how argv arrived.
import process from "node:process";
process.stdout.write(JSON.stringify(process.argv.slice(2)));
