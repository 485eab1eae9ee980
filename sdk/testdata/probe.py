"""The Python implementation of objectservertest.Probe's server."""

from agentkernel_object import ObjectError, ObjectServer

server = ObjectServer()


@server.method("echo")
def echo(ctx, args):
    alarm = None
    if ctx.alarm is not None:
        alarm = {"id": ctx.alarm.id, "retry_count": ctx.alarm.retry_count, "is_retry": ctx.alarm.is_retry}
    return {"method": ctx.method, "class": ctx.object_class, "id": ctx.object_id,
            "mode": ctx.mode, "args": args, "alarm": alarm}


@server.method("apply")
def apply(ctx, args):
    for op in args.get("ops") or []:
        if "put" in op:
            ctx.storage.put(op["put"], op.get("value"))
        elif "delete" in op:
            ctx.storage.delete(op["delete"])
    fail = args.get("fail")
    if fail:
        raise ObjectError(fail["message"], status=fail["status"])
    return {"keys": ctx.storage.list()}


@server.method("boom")
def boom(ctx, args):
    raise RuntimeError("boom")


if __name__ == "__main__":
    server.serve()
