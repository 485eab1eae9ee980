"use strict";
// A durable object that counts: increment {"amount": n} (default 1), get and
// reset each answer {"value": n}. The count lives in the object's storage
// under "count", so it survives hibernation.
//
// Run: node counter.js — the server listens on 127.0.0.1:9333.

const { ObjectServer, ObjectError } = require("./agentkernel-object");

const server = new ObjectServer();

server.method("increment", (ctx, args) => {
  const isObject = args !== null && typeof args === "object" && !Array.isArray(args);
  const amount = isObject && args.amount !== undefined ? args.amount : 1;
  if ((args !== null && !isObject) || !Number.isSafeInteger(amount)) {
    throw new ObjectError("increment: amount must be an integer", 400);
  }
  const value = ctx.storage.get("count", 0) + amount;
  ctx.storage.put("count", value);
  return { value };
});

server.method("get", (ctx) => ({ value: ctx.storage.get("count", 0) }));

server.method("reset", (ctx) => {
  ctx.storage.delete("count");
  return { value: 0 };
});

server.listen().catch((err) => {
  console.error(err);
  process.exit(1);
});
