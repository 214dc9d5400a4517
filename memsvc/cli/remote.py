"""The operator commands: look at and manage the sessions and lessons of a running server.

`memsvc sessions`, `show`, `search`, `compact`, `summarize`, `reset`, `remove`, `delete` and
`memsvc lessons list|show|edit|delete`, each one or a few RPCs through the Python client
(`--target`, the token from `--token-file`), printed as tables or, with `--json`, as the
results' JSON. Owns the arguments, what each command prints and its exit code (1 when the
server refuses, with its status and reason on stderr). Must never open the data directory:
everything goes through the server.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from memsvc.cli.connection import add_connection_arguments, client_arguments
from memsvc.cli.render import as_json, cut, table, when

MATCHES = ("semantic", "keyword", "hybrid")
TIME_RANGES = ("all", "day", "week", "month", "year")

Command = Callable[[Any, argparse.Namespace], None]


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")


def _moment(text: str) -> int:
    """An ISO date or time (local unless it says otherwise) as Unix nanoseconds."""
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1e9)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO date or time: {text!r} (e.g. 2025-03-01 or 2025-03-01T14:00)") from None


# -- sessions ---------------------------------------------------------------------------


def _pages(fetch: Callable[[str], Any], items: str) -> Iterator[Any]:
    token = ""
    while True:
        page = fetch(token)
        yield from getattr(page, items)
        if not (token := page.next_page_token):
            return


def sessions(memory: Any, args: argparse.Namespace) -> None:
    found = list(_pages(lambda token: memory.list_sessions(page_size=1000, page_token=token), "sessions"))
    if args.json:
        return as_json(found)
    table(["SESSION", "MESSAGES", "BYTES", "LAST APPEND", "SUMMARY"],
          ([s.session_id, s.message_count, s.history_bytes, when(s.last_append_unix_nano),
            "yes" if s.has_summary else "no"] for s in found), "no sessions")


def _messages(messages: list[Any], empty: str) -> None:
    table(["ID", "SENT", "ROLE", "SENDER", "CONTENT"],
          ([m.id, when(m.send_at_unix_nano), m.role, m.sender, cut(m.content)] for m in messages), empty)


def _summary(summary: Any) -> None:
    if summary is None:
        print("no rolling summary")
        return
    for rule in summary.key_decisions:
        print(f"  rule: {rule}")
    for past in summary.past_discussions:
        print(f"  past: {past.topic} ({past.last_discussed}): {cut(past.description)}")
    current = summary.current_discussion
    if current is not None:
        print(f"  now:  {current.topic}: {cut(current.description)}")


def show(memory: Any, args: argparse.Namespace) -> None:
    stored = memory.get_summary(args.session)  # NOT_FOUND first, for a session that does not exist
    context = memory.get_context(args.session)
    if args.json:
        return as_json({"window": context.window, "summary": stored.summary,
                        "cursor_unix_nano": stored.cursor_unix_nano, "last_run": stored.last_run})
    print(f"session {args.session}: the last {len(context.window)} messages")
    _messages(context.window, "  (the window is empty)")
    print(f"\nrolling summary (cursor {when(stored.cursor_unix_nano)}; last run {_last_run(stored.last_run)}):")
    _summary(stored.summary)


def _last_run(run: Any) -> str:
    """The summarizer's last run on the session, in words: when, what started it, how it went."""
    if run is None:
        return "none recorded"
    said = {"summarized": f"summarized {run.messages} messages", "nothing_new": "nothing new to summarize",
            "failed": f"failed: {run.reason}: {run.message}"}.get(run.outcome, run.outcome)
    return f"{when(run.finished_at_unix_nano)} by {run.trigger.replace('_', ' ')}, {said}"


def search(memory: Any, args: argparse.Namespace) -> None:
    reply = memory.search(args.session, args.query, match=args.match, limit=args.limit, time_range=args.time_range,
                          since_unix_nano=args.since, until_unix_nano=args.until,
                          include_window=args.include_window, explain=args.explain or None)
    if args.json:
        return as_json(reply)
    if args.explain:
        table(["RUN", "SCORE", "TIER", "KEYWORD", "BM25", "SEMANTIC", "SIMILARITY", "FUSED", "RERANK", "ID", "ROLE",
               "CONTENT"], ([hit.run or "", *_why(hit), hit.message.id, hit.message.role, cut(hit.message.content, 48)]
                            for hit in reply.hits), "no messages found")
    else:
        table(["RUN", "SCORE", "SOURCE", "ID", "SENT", "ROLE", "CONTENT"],
              ([hit.run or "", "context" if hit.is_context else f"{hit.score:.3f}", hit.source, hit.message.id,
                when(hit.message.send_at_unix_nano), hit.message.role, cut(hit.message.content)]
               for hit in reply.hits), "no messages found")
    if reply.unsearched:
        print(f"{reply.unsearched} messages could not be searched yet (embeddings pending)", file=sys.stderr)


def _why(hit: Any) -> list[str]:
    """Score, tier, keyword rank and BM25, semantic rank and similarity, fused and rerank scores ("-" where a
    ranking did not hold the match); a context message has none."""
    why = hit.explanation
    if why is None:
        return ["context", *[""] * 7]
    def ranked(place: int, score: float) -> list[str]:
        return [f"#{place}", f"{score:.3f}"] if place else ["-", "-"]
    return [f"{hit.score:.3f}", why.tier, *ranked(why.keyword_rank, why.keyword_score),
            *ranked(why.semantic_rank, why.semantic_similarity), f"{why.fused_score:.4f}" if why.fused_score else "-",
            f"{why.rerank_score:.3f}" if why.reranked else "-"]


def compact(memory: Any, args: argparse.Namespace) -> None:
    reply = memory.compact(args.session)
    if args.json:
        return as_json(reply)
    print(f"moved {reply.removed} messages out of history.json; older than {when(reply.start_at_unix_nano)} "
          "they are served from the archive")


def summarize(memory: Any, args: argparse.Namespace) -> None:
    reply = memory.summarize(args.session)
    if args.json:
        return as_json(reply)
    print(f"folded {reply.count} messages into the rolling summary:")
    _summary(reply.summary)


def _deleted(reply: Any, args: argparse.Namespace, verb: str) -> None:
    if args.json:
        return as_json(reply)
    deleted = reply.deleted
    print(f"{verb} {args.session}: {deleted.history_messages} messages from history.json, "
          f"{deleted.archived_messages} from the archive, {deleted.vectors} vectors"
          f"{', and the rolling summary' if deleted.summary else ''}")


def reset(memory: Any, args: argparse.Namespace) -> None:
    _deleted(memory.reset(args.session, args.mode), args, "reset")


def remove(memory: Any, args: argparse.Namespace) -> None:
    _deleted(memory.remove_session(args.session), args, "removed")


def delete(memory: Any, args: argparse.Namespace) -> None:
    reply = memory.delete_messages(args.session, args.id or (), last=args.last or 0)
    if args.json:
        return as_json(reply)
    _messages(reply.messages, "no such messages: nothing was deleted")
    deleted = reply.deleted
    print(f"deleted from {args.session}: {deleted.history_messages} messages from history.json, "
          f"{deleted.archived_messages} from the archive, {deleted.vectors} vectors")


# -- lessons ----------------------------------------------------------------------------


def _lessons(records: list[Any]) -> None:
    table(["ID", "TOOL", "HITS", "EXPIRES", "SYMPTOM", "ACTION"],
          ([r.id, r.tool_name, r.hit_count, when(r.expires_at_unix_nano), cut(r.symptom, 40), cut(r.action, 40)]
           for r in records), "no lessons")


def lessons_list(memory: Any, args: argparse.Namespace) -> None:
    if args.query:
        found = memory.search_errors(args.query, limit=32).records
    else:
        found = list(_pages(lambda token: memory.list_errors(page_size=500, page_token=token, tool_name=args.tool),
                            "records"))
    if args.json:
        return as_json(found)
    _lessons(found)


def _lesson(memory: Any, record_id: str) -> Any:
    """ListErrors pages until the id: the contract has no single-lesson read."""
    import grpc

    from memsvc_client import NotFoundError

    for record in _pages(lambda token: memory.list_errors(page_size=500, page_token=token), "records"):
        if record.id == record_id:
            return record
    raise NotFoundError(grpc.StatusCode.NOT_FOUND, "ERROR_RECORD_NOT_FOUND",
                        f"no lesson {record_id!r} (or it expired)")


def _print_lesson(record: Any) -> None:
    for label, value in (("id", record.id), ("tool", record.tool_name), ("symptom", record.symptom),
                         ("cause", record.cause), ("action", record.action),
                         ("keywords", ", ".join(record.keywords)), ("session", record.session_id),
                         ("created", when(record.created_at_unix_nano)), ("last hit", when(record.last_hit_unix_nano)),
                         ("expires", when(record.expires_at_unix_nano)), ("hits", record.hit_count)):
        print(f"{label + ':':10} {value}")


def lessons_show(memory: Any, args: argparse.Namespace) -> None:
    record = _lesson(memory, args.id)
    return as_json(record) if args.json else _print_lesson(record)


def lessons_edit(memory: Any, args: argparse.Namespace) -> None:
    action = sys.stdin.read().strip() if args.action == "-" else args.action
    record = memory.update_error_action(args.id, action).record
    return as_json(record) if args.json else _print_lesson(record)


def lessons_delete(memory: Any, args: argparse.Namespace) -> None:
    record = memory.delete_error(args.id).record
    if args.json:
        return as_json(record)
    print(f"deleted lesson {record.id} ({record.tool_name}: {cut(record.symptom, 60)})")


# -- the parser -------------------------------------------------------------------------


def _command(commands: Any, name: str, run: Command, summary: str, description: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=summary, description=description)
    add_connection_arguments(parser)
    _json_flag(parser)
    parser.set_defaults(run=run)
    return parser


def add_commands(commands: Any) -> None:
    """The operator commands, on the `memsvc` parser's subcommands."""
    _command(commands, "sessions", sessions, "list the stored sessions",
             "List every stored session: its messages in history.json, their size, the last append and "
             "whether it has a rolling summary.")
    session_commands = [
        ("show", show, "show a session's window and rolling summary",
         "Show the recent window of a session (what an agent gets from GetContext) and its rolling summary."),
        ("compact", compact, "move a session's older messages to the archive now",
         "Compact now: move older messages out of history.json into the archive (still searchable), keeping "
         "the window and cutting only after an assistant message."),
        ("summarize", summarize, "fold new messages into the rolling summary now",
         "Summarize now: fold the messages newer than the summary cursor into the rolling summary. Needs a "
         "summary model on the server; waits for the LLM (raise --timeout)."),
        ("reset", reset, "clear a session's conversation from every store",
         "Reset: clear the conversation from history.json, the archive and the vectors. --mode summary (the "
         "default) keeps the rolling summary, --mode all deletes it too."),
        ("remove", remove, "delete a session from every store",
         "Remove the session from every store, its summary included."),
    ]
    for name, run, summary, description in session_commands:
        parser = _command(commands, name, run, summary, description)
        parser.add_argument("session", metavar="SESSION", help="the session id")
        if name == "reset":
            parser.add_argument("--mode", choices=("summary", "all"), default="summary",
                                help="what goes: the conversation only (summary, the default) or everything (all)")
    deleter = _command(commands, "delete", delete, "delete some messages of a session from every store",
                       "Delete the messages with the given ids (see `memsvc show` or `search`), or the newest N, "
                       "from history.json, the archive and the vectors; prints what was deleted. Ids are never "
                       "given again; the rolling summary is kept.")
    deleter.add_argument("session", metavar="SESSION", help="the session id")
    target = deleter.add_mutually_exclusive_group(required=True)
    target.add_argument("--id", type=int, action="append", help="a message id (repeatable)")
    target.add_argument("--last", type=int, help="the newest N messages")
    finder = _command(commands, "search", search, "search a session's messages",
                      "Search one session: by keyword over the archive and the recent messages, by meaning over "
                      "the recent messages (semantic), or both fused (hybrid, the server's default).")
    finder.add_argument("session", metavar="SESSION", help="the session id")
    finder.add_argument("query", metavar="QUERY", help="the words to find (keyword: every word must occur)")
    finder.add_argument("--match", choices=MATCHES, help="how to match (default: hybrid, the server's default)")
    finder.add_argument("--limit", type=int, default=0, help="most hits (default 8, at most 32)")
    finder.add_argument("--time-range", choices=TIME_RANGES, help="only the last day, week, month or year")
    finder.add_argument("--since", type=_moment, default=0, help="only messages sent at or after this ISO time")
    finder.add_argument("--until", type=_moment, default=0, help="only messages sent before this ISO time")
    finder.add_argument("--include-window", action="store_true",
                        help="semantic and hybrid: also return messages of the current window")
    finder.add_argument("--explain", action="store_true",
                        help="say why each match was found: its tier, its rank and score in the keyword (BM25) and "
                             "semantic (similarity) rankings, the fused score (hybrid) and the reranker's")

    lessons = commands.add_parser("lessons", help="list, show, edit or delete error-memory lessons",
                                  description="Error memory: the lessons from tool failures, shared by every "
                                              "session.")
    actions = lessons.add_subparsers(dest="lessons_command", required=True, metavar="{list,show,edit,delete}")
    listing = _command(actions, "list", lessons_list, "list lessons, newest first",
                       "List lessons, newest first (browsing does not refresh their time to live).")
    listing.add_argument("--tool", default="", help="only this tool's lessons")
    listing.add_argument("--query", default="", help="only lessons with this keyword in any field (best first)")
    shown = _command(actions, "show", lessons_show, "show one lesson in full", "Show one lesson, every field.")
    shown.add_argument("id", metavar="ID", help="the lesson id (from `memsvc lessons list`)")
    edit = _command(actions, "edit", lessons_edit, "rewrite a lesson's action",
                    "Rewrite the action (the fix) of a lesson; its time to live stays.")
    edit.add_argument("id", metavar="ID", help="the lesson id")
    edit.add_argument("--action", required=True, help="the new action; - reads it from standard input")
    deleted = _command(actions, "delete", lessons_delete, "delete a lesson", "Delete a lesson.")
    deleted.add_argument("id", metavar="ID", help="the lesson id")


def run(args: argparse.Namespace) -> int:
    from memsvc_client import Client, MemsvcError

    try:
        with Client(args.target, **client_arguments(args)) as memory:
            args.run(memory, args)
    except MemsvcError as error:
        print(f"memsvc: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # the token or a TLS file
        print(f"memsvc: {error}", file=sys.stderr)
        return 2
    return 0
