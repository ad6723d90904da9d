// The engine suite with node processes sharing one PostgreSQL database (created per test).
import { describeEngineSuite } from "../support/engine-suite.js";

describeEngineSuite("postgres");
