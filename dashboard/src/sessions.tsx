/** The sessions list: every stored session, a page at a time, filtered by id. */
import { useEffect, useState } from "preact/hooks";
import { memory } from "./api.js";
import { bytes, time } from "./format.js";
import type { SessionInfo } from "./gen/memsvc/v1/memory_pb.js";
import { ErrorBanner, useCall } from "./ui.js";

const PAGE_SIZES = [25, 50, 100];

export function Sessions() {
  const { error, busy, run } = useCall();
  const [filter, setFilter] = useState("");
  const [pageSize, setPageSize] = useState(PAGE_SIZES[0]);
  const [pages, setPages] = useState<string[]>([""]);
  const [sessions, setSessions] = useState<SessionInfo[]>([]);
  const [next, setNext] = useState("");
  const token = pages[pages.length - 1];

  useEffect(() => {
    // Typing in the filter asks again: wait for a pause, and let only the latest answer show.
    let latest = true;
    const timer = setTimeout(() => {
      void run(() => memory.listSessions({ pageSize, pageToken: token, sessionIdContains: filter })).then((page) => {
        if (page && latest) {
          setSessions(page.sessions);
          setNext(page.nextPageToken);
        }
      });
    }, filter ? 200 : 0);
    return () => {
      latest = false;
      clearTimeout(timer);
    };
  }, [filter, pageSize, token]);

  const restart = (change: () => void) => {
    change();
    setPages([""]);
  };

  return (
    <section>
      <div class="toolbar">
        <h1>Sessions</h1>
        <label>
          Filter by id
          <input type="search" value={filter} placeholder="part of a session id"
            onInput={(event) => restart(() => setFilter(event.currentTarget.value))} />
        </label>
        <label>
          Per page
          <select value={pageSize} onChange={(event) => restart(() => setPageSize(Number(event.currentTarget.value)))}>
            {PAGE_SIZES.map((size) => <option value={size}>{size}</option>)}
          </select>
        </label>
      </div>
      <ErrorBanner error={error} />
      <table class="sessions" aria-busy={busy}>
        <thead>
          <tr><th>Session</th><th class="number">Messages</th><th class="number">Size</th><th>Last append</th>
            <th>Summary</th></tr>
        </thead>
        <tbody>
          {sessions.map((info) => (
            <tr key={info.sessionId}>
              <td><a href={`#/sessions/${encodeURIComponent(info.sessionId)}`}>{info.sessionId}</a></td>
              <td class="number">{info.messageCount}</td>
              <td class="number">{bytes(info.historyBytes)}</td>
              <td class="when">{time(info.lastAppendUnixNano)}</td>
              <td>{info.hasSummary ? "yes" : "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!busy && !error && sessions.length === 0 ? (
        <p class="empty">{filter ? `No session id contains “${filter}”.` : "No sessions stored yet."}</p>
      ) : null}
      <nav class="pager" aria-label="pages">
        <button type="button" disabled={pages.length === 1} onClick={() => setPages(pages.slice(0, -1))}>
          ← Previous page
        </button>
        <span>Page {pages.length}</span>
        <button type="button" disabled={!next} onClick={() => setPages([...pages, next])}>Next page →</button>
      </nav>
    </section>
  );
}
