// The engine suite with node processes sharing one SQLite file.
import { describeEngineSuite } from "../support/engine-suite.js";

describeEngineSuite("sqlite");
