"""Drives `squadctl mcp` with the official MCP Python SDK (the `mcp` package),
as an agent host would. Used by tests/e2e/mcp.rs.

usage: mcp_client.py SQUADCTL ROOT SESSION SCENARIO
(SQUAD_MCP_URLS, a JSON object agent -> URL: reach those agents' servers over
Streamable HTTP instead of starting them on stdio)
Prints one JSON object: the steps (tool, is_error, text) and the resource
updates each server sent. SCENARIO is `task` (a whole task through the tools
against a running squadd), `refuse` (writes the server must refuse) or
`lead_only` (the lead's tools, listed for and called by an agent).
"""

import json
import sys
from contextlib import AsyncExitStack

import os

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

SQUADCTL, ROOT, SESSION, SCENARIO = sys.argv[1:5]
steps = []
updates = {}
inbox_updated = {}
tasks_updated = {}


# Agent -> URL of a `squadctl mcp --http` server the test started: those
# agents are reached over Streamable HTTP, the others over stdio.
URLS = json.loads(os.environ.get("SQUAD_MCP_URLS", "{}"))
# Agent -> the bearer token of its HTTP server (the file the server wrote).
TOKENS = json.loads(os.environ.get("SQUAD_MCP_TOKENS", "{}"))


async def open_server(stack, agent):
    if agent in URLS:
        headers = {"Authorization": f"Bearer {TOKENS[agent]}"} if agent in TOKENS else None
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        read, write = await stack.enter_async_context(
            streamable_http_client(URLS[agent], http_client=http)
        )
    else:
        params = StdioServerParameters(
            command=SQUADCTL, args=["--root", ROOT, "mcp", "--agent", agent], env={}
        )
        read, write = await stack.enter_async_context(stdio_client(params))
    updates[agent] = []
    inbox_updated[agent] = anyio.Event()
    tasks_updated[agent] = anyio.Event()

    async def on_message(message):
        # Server notifications arrive here; resource updates carry the URI.
        params = getattr(getattr(message, "root", message), "params", None)
        uri = getattr(params, "uri", None)
        if uri is not None:
            updates[agent].append(str(uri))
            if str(uri) == "squad://agent/inbox":
                inbox_updated[agent].set()
            if str(uri) == "squad://agent/tasks":
                tasks_updated[agent].set()

    session = await stack.enter_async_context(
        ClientSession(read, write, message_handler=on_message)
    )
    await session.initialize()
    return session


async def call(session, agent, tool, args):
    res = await session.call_tool(tool, args)
    text = "".join(getattr(c, "text", "") for c in res.content)
    steps.append({"agent": agent, "tool": tool, "is_error": bool(res.is_error), "text": text})
    return res.is_error, text


async def task(stack):
    alice = await open_server(stack, "alice")
    bob = await open_server(stack, "bob")
    lead = await open_server(stack, "lead")
    tools = await alice.list_tools()
    out = {"tools": sorted(t.name for t in tools.tools)}
    out["schemas"] = {t.name: t.input_schema for t in tools.tools}
    out["lead_tools"] = sorted(t.name for t in (await lead.list_tools()).tools)
    resources = await alice.list_resources()
    out["resources"] = sorted(str(r.uri) for r in resources.resources)
    _, text = await call(alice, "alice", "next", {})
    task_id = json.loads(text)["tasks"][0]["task_id"]
    await call(alice, "alice", "lock_acquire", {"targets": ["src/api.rs"], "task": task_id})
    await call(bob, "bob", "lock_acquire", {"targets": ["src/api.rs"], "task": "task_002"})
    await call(alice, "alice", "progress", {"task": task_id, "status": "in_progress", "action": "shaping the API"})
    await call(alice, "alice", "send", {
        "to": "bob", "priority": "high", "type": "question", "subject": "api shape?",
        "message": "flat or nested?", "task": task_id,
    })
    # squadd delivers; inbox_read waits for it (inotify in the command).
    # A peek and a show leave it unread; the plain read acknowledges it.
    _, text = await call(bob, "bob", "inbox_read", {"wait": "60s", "peek": True})
    await call(bob, "bob", "inbox_show", {"message_id": json.loads(text)["message_id"]})
    _, text = await call(bob, "bob", "inbox_list", {})
    out["bob_inbox_after_peek"] = json.loads(text)
    _, text = await call(bob, "bob", "inbox_read", {"wait": "60s"})
    question = json.loads(text)
    await call(bob, "bob", "reply", {"message_id": question["message_id"], "message": "flat"})
    # The reply lands in alice's inbox: her server says so unasked.
    with anyio.move_on_after(60):
        await inbox_updated["alice"].wait()
    _, text = await call(alice, "alice", "inbox_read", {"wait": "60s"})
    await call(alice, "alice", "progress", {"task": task_id, "status": "completed", "artifact": ["src/api.rs"]})
    # bob's task required alice's: his server says it is ready now.
    with anyio.move_on_after(60):
        await tasks_updated["bob"].wait()
    await call(alice, "alice", "lock_release", {"all": True})
    contents = await alice.read_resource("squad://agent/tasks")
    out["tasks_resource"] = contents.contents[0].text
    await call(lead, "lead", "session_complete", {"session": SESSION})
    return out


async def refuse(stack):
    alice = await open_server(stack, "alice")
    await call(alice, "alice", "progress", {"task": "task_nope", "status": "in_progress"})
    await call(alice, "alice", "progress", {"task": "task_001", "status": "finished"})
    # The agent is the server's: an `agent` argument is not in the schema and
    # does not make alice report on bob's task.
    await call(alice, "alice", "progress", {"task": "task_002", "status": "in_progress", "agent": "bob"})
    await call(alice, "alice", "task_new", {"agent": "bob", "instruction": "x", "requires": ["task_nope"]})
    await call(alice, "alice", "send", {
        "to": "Not An Agent", "priority": "high", "type": "question", "subject": "s", "message": "m",
    })
    # A typo of a known agent (bob): refused, naming him (issue 40 item 3).
    await call(alice, "alice", "send", {
        "to": "bbo", "priority": "high", "type": "question", "subject": "s", "message": "m",
    })
    await call(alice, "alice", "lock_release", {"targets": ["src/never-held.rs"]})
    return {}


async def lead_only(stack):
    """The lead's tools: listed for the lead only; called by an agent, refused."""
    alice = await open_server(stack, "alice")
    lead = await open_server(stack, "lead")
    out = {
        "alice_tools": sorted(t.name for t in (await alice.list_tools()).tools),
        "lead_tools": sorted(t.name for t in (await lead.list_tools()).tools),
    }
    # Not listed, but a client may still call them by name.
    await call(alice, "alice", "task_new", {"agent": "alice", "instruction": "widen", "allow": ["**"]})
    await call(alice, "alice", "session_complete", {"session": SESSION})
    await call(alice, "alice", "session_phase", {"session": SESSION, "phase": "quality"})
    await call(alice, "alice", "session_gate", {"session": SESSION, "gate": "design", "status": "passed"})
    await call(alice, "alice", "session_fail", {"session": SESSION, "reason": "r"})
    return out


async def dashes_and_sizes(stack):
    """Free text that looks like options, and a message over the limit."""
    alice = await open_server(stack, "alice")
    bullets = "- one\n- two\n--force"
    await call(alice, "alice", "send", {
        "to": "bob", "priority": "high", "type": "question", "subject": "-s subject",
        "message": bullets, "task": "task_001",
    })
    await call(alice, "alice", "progress", {
        "task": "task_001", "status": "in_progress", "action": "--status completed",
        "done": ["- a bullet"], "todo": ["-x"],
    })
    await call(alice, "alice", "report_error", {
        "severity": "warning", "type": "other", "message": "--json - listed", "task": "task_001",
    })
    await call(alice, "alice", "memory_add", {
        "type": "note", "summary": "-- not an option", "details": "- detail",
    })
    await call(alice, "alice", "send", {
        "to": "bob", "priority": "low", "type": "notification", "subject": "big",
        "message": "x" * (2 * 1024 * 1024), "task": "task_001",
    })
    return {}


async def impersonate(stack):
    """alice's server driven to act as bob: each call stays alice's."""
    alice = await open_server(stack, "alice")
    bob = await open_server(stack, "bob")
    as_bob = {"agent": "bob", "from": "bob", "sender": "bob", "as": "bob"}
    # Sent by alice, whatever the arguments say.
    await call(alice, "alice", "send", {
        "to": "bob", "priority": "high", "type": "question", "subject": "from bob?",
        "message": "m", "task": "task_001", **as_bob,
    })
    _, text = await call(bob, "bob", "inbox_read", {"wait": "60s", "peek": True})
    out = {"bob_peek": json.loads(text)}
    message_id = out["bob_peek"]["message_id"]
    # bob's inbox is not alice's to read or acknowledge, by any argument.
    _, out["alice_list"] = await call(alice, "alice", "inbox_list", dict(as_bob))
    await call(alice, "alice", "inbox_show", {"message_id": message_id, **as_bob})
    await call(alice, "alice", "inbox_ack", {"message_id": message_id, **as_bob})
    await call(alice, "alice", "inbox_read", {"peek": False, **as_bob})
    # Nor does alice take a lock for bob's task.
    await call(alice, "alice", "lock_acquire", {"targets": ["src/b.rs"], "task": "task_002", **as_bob})
    _, text = await call(bob, "bob", "inbox_list", {})
    out["bob_list"] = json.loads(text)
    return out


SCENARIOS = {
    "impersonate": impersonate,
    "task": task,
    "refuse": refuse,
    "lead_only": lead_only,
    "dashes_and_sizes": dashes_and_sizes,
}


async def main():
    async with AsyncExitStack() as stack:
        out = await SCENARIOS[SCENARIO](stack)
    out["steps"] = steps
    out["updates"] = updates
    print(json.dumps(out))


anyio.run(main)
