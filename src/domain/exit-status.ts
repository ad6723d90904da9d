/**
 * One way to say how a task's process ended, in chat and on the CLI: "exit 1", and the error only
 * when it says more than that (the executor's "exited with status 1" says nothing more).
 */
export function exitWords(exitCode: number | null, error: string | null): string[] {
  const words: string[] = [];
  if (exitCode !== null) words.push(`exit ${exitCode}`);
  if (error !== null && !(exitCode !== null && error === `exited with status ${exitCode}`)) words.push(error);
  return words;
}
