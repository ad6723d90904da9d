/**
 * An executor whose results carry none of the node's secrets: the output so far, the final output
 * tail, the error and what the action published in DAGBOT_OUTPUT of every attempt are masked
 * (domain/secret-mask.ts) before the worker checks or stores them or anything sends them, so neither
 * `logs` nor an event, the room or a dependent's argv ever sees them (docs/architecture.md, "Node
 * config"). A masked output value is `*` where the secret was, so its pattern usually refuses it.
 */
import type { Masker } from "../domain/secret-mask.js";
import type { ExecRequest, ExecResult, Executor, OutputSoFar } from "../ports/executor.js";

/**
 * `keepChars`: the most of an output's tail anything keeps (the store's limit). Only that much is
 * masked and passed on: masking costs about 12 ns a character, and an action's output_limit may be
 * 64 MiB, re-read every second while it runs.
 */
export function maskingExecutor(executor: Executor, mask: Masker, keepChars = Infinity): Executor {
  const tail = (text: string): string => (text.length > keepChars ? text.slice(-keepChars) : text);
  return {
    ...(executor.prepare === undefined ? {} : { prepare: () => executor.prepare?.() }),
    async run(request: ExecRequest): Promise<ExecResult> {
      const onOutput = request.onOutput;
      const result = await executor.run(
        onOutput === undefined
          ? request
          : {
              ...request,
              onOutput: (soFar: OutputSoFar) => onOutput({ ...soFar, output: mask(tail(soFar.output)) }),
            },
      );
      const output = tail(result.output);
      return {
        ...result,
        output: mask(output),
        outputTruncated: result.outputTruncated || output.length < result.output.length,
        ...(result.error === undefined ? {} : { error: mask(result.error) }),
        ...(result.published === undefined
          ? {}
          : {
              published:
                "text" in result.published
                  ? { text: mask(result.published.text) }
                  : "problem" in result.published
                    ? { problem: mask(result.published.problem) }
                    : // Counts by name; a message names only the DAG's declared names (oversizeProblem).
                      result.published,
            }),
      };
    },
  };
}
