"""A durable object that counts: increment {"amount": n} (default 1), get and
reset each answer {"value": n}. The count lives in the object's storage under
"count", so it survives hibernation.

Run: python3 counter.py (with agentkernel_object.py next to it or on
PYTHONPATH); the server listens on 127.0.0.1:9333.
"""

from agentkernel_object import ObjectError, ObjectServer

server = ObjectServer()


@server.method("increment")
def increment(ctx, args):
    amount = (args or {}).get("amount", 1) if isinstance(args, (dict, type(None))) else None
    # bool is an int subclass in Python; JSON true is not an amount.
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise ObjectError("increment: amount must be an integer", status=400)
    value = ctx.storage.get("count", 0) + amount
    ctx.storage.put("count", value)
    return {"value": value}


@server.method("get")
def get(ctx, args):
    return {"value": ctx.storage.get("count", 0)}


@server.method("reset")
def reset(ctx, args):
    ctx.storage.delete("count")
    return {"value": 0}


if __name__ == "__main__":
    server.serve()
