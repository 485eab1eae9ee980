"use strict";
// The Node implementation of objectservertest.Probe's server.
const { ObjectServer, ObjectError } = require(process.env.AGENTKERNEL_OBJECT_MODULE);

const server = new ObjectServer();

server.method("echo", (ctx, args) => ({
  method: ctx.method,
  class: ctx.class,
  id: ctx.id,
  mode: ctx.mode,
  args,
  alarm: ctx.alarm && { id: ctx.alarm.id, retry_count: ctx.alarm.retryCount, is_retry: ctx.alarm.isRetry },
}));

// async, to show a Promise result is awaited.
server.method("apply", async (ctx, args) => {
  for (const op of args.ops || []) {
    if ("put" in op) ctx.storage.put(op.put, op.value);
    else if ("delete" in op) ctx.storage.delete(op.delete);
  }
  await new Promise((resolve) => setImmediate(resolve));
  if (args.fail) throw new ObjectError(args.fail.message, args.fail.status);
  return { keys: ctx.storage.list() };
});

server.method("boom", () => {
  throw new Error("boom");
});

server.listen();
