/**
 * An executor whose results carry none of the node's secrets: the output so far, the final output
 * tail and the error of every attempt are masked (domain/secret-mask.ts) before the worker stores
 * them or anything sends them, so neither `logs` nor an event nor the room ever sees them.
 */
import type { Masker } from "../domain/secret-mask.js";
import type { ExecRequest, ExecResult, Executor } from "../ports/executor.js";

export function maskingExecutor(executor: Executor, mask: Masker): Executor {
  return {
    async run(request: ExecRequest): Promise<ExecResult> {
      const onOutput = request.onOutput;
      const result = await executor.run(
        onOutput === undefined
          ? request
          : { ...request, onOutput: (soFar) => onOutput({ ...soFar, output: mask(soFar.output) }) },
      );
      return {
        ...result,
        output: mask(result.output),
        ...(result.error === undefined ? {} : { error: mask(result.error) }),
      };
    },
  };
}
