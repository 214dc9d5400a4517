/**
 * The Lessons view: error-memory records (tool, symptom, action, outcome, expiry),
 * listed newest first or searched by keyword; a record's action is edited in place
 * (its expiry stays as it was) and a record can be deleted, after a confirmation.
 */
import { useEffect, useState } from "preact/hooks";
import { lessons } from "./api.js";
import { time } from "./format.js";
import { type ErrorRecord, Outcome } from "./gen/memsvc/v1/error_memory_pb.js";
import { ErrorBanner, Notice, useCall, useConfirm } from "./ui.js";

const PAGE_SIZE = 50;

export function Lessons() {
  const { error, busy, run } = useCall();
  const [confirmation, ask] = useConfirm();
  const [query, setQuery] = useState("");
  const [tool, setTool] = useState("");
  const [searched, setSearched] = useState({ query: "", tool: "" });
  const [pages, setPages] = useState<string[]>([""]);
  const [records, setRecords] = useState<ErrorRecord[]>([]);
  const [next, setNext] = useState("");
  const [notice, setNotice] = useState("");
  const token = pages[pages.length - 1];

  useEffect(() => {
    void run(async () => {
      if (searched.query) {
        const found = await lessons.searchErrors({ query: searched.query, limit: 32 });
        return { records: found.records.filter((r) => !searched.tool || r.toolName === searched.tool), next: "" };
      }
      const page = await lessons.listErrors({ pageSize: PAGE_SIZE, pageToken: token, toolName: searched.tool });
      return { records: page.records, next: page.nextPageToken };
    }).then((shown) => {
      if (shown) {
        setRecords(shown.records);
        setNext(shown.next);
      }
    });
  }, [searched, token]);

  const submit = (event: Event) => {
    event.preventDefault();
    setNotice("");
    setPages([""]);
    setSearched({ query: query.trim(), tool: tool.trim() });
  };
  const replace = (updated: ErrorRecord) => setRecords((shown) => shown.map((r) => (r.id === updated.id ? updated : r)));
  const remove = (record: ErrorRecord) => ask({
    title: `Delete this lesson of ${record.toolName}?`,
    detail: `“${record.symptom}” → “${record.action}”. Agents will no longer be told this fix.`,
    confirm: "Delete",
    then: () => void run(() => lessons.deleteError({ id: record.id })).then((done) => {
      if (done) {
        setRecords((shown) => shown.filter((r) => r.id !== record.id));
        setNotice(`Deleted the lesson of ${record.toolName} (“${record.symptom}”).`);
      }
    }),
  });

  return (
    <section>
      <div class="toolbar">
        <h1>Lessons</h1>
        <form class="inline" role="search" onSubmit={submit}>
          <input type="search" aria-label="Search lessons" placeholder="keyword: tool, symptom, cause, action"
            value={query} onInput={(event) => setQuery(event.currentTarget.value)} />
          <input type="text" aria-label="Tool" placeholder="tool name (all tools)" value={tool}
            onInput={(event) => setTool(event.currentTarget.value)} />
          <button type="submit">{query.trim() ? "Search" : "List"}</button>
        </form>
      </div>
      <Notice text={notice} />
      <ErrorBanner error={error} />
      <table class="lessons" aria-busy={busy}>
        <thead>
          <tr><th>Tool</th><th>Symptom</th><th>Action</th><th>Outcome</th><th>Expires</th><th class="number">Hits</th>
            <th /></tr>
        </thead>
        <tbody>
          {records.map((record) => (
            <Lesson key={record.id} record={record} onSaved={replace} onDelete={() => remove(record)} />
          ))}
        </tbody>
      </table>
      {!busy && !error && records.length === 0 ? (
        <p class="empty">{searched.query ? `No lesson mentions “${searched.query}”.` : "No lessons recorded yet."}</p>
      ) : null}
      {searched.query ? null : (
        <nav class="pager" aria-label="pages">
          <button type="button" disabled={pages.length === 1} onClick={() => setPages(pages.slice(0, -1))}>
            ← Newer
          </button>
          <span>Page {pages.length}</span>
          <button type="button" disabled={!next} onClick={() => setPages([...pages, next])}>Older →</button>
        </nav>
      )}
      {confirmation}
    </section>
  );
}

const OUTCOMES: Record<number, string> = { [Outcome.RESOLVED]: "resolved", [Outcome.FAILED]: "failed",
  [Outcome.ABANDONED]: "abandoned" };

function Lesson({ record, onSaved, onDelete }: { record: ErrorRecord; onSaved: (r: ErrorRecord) => void;
  onDelete: () => void }) {
  const { error, busy, run } = useCall();
  const [draft, setDraft] = useState<string | null>(null);
  const save = () => void run(() => lessons.updateErrorAction({ id: record.id, action: draft ?? "" })).then((done) => {
    if (done?.record) {
      setDraft(null);
      onSaved(done.record);
    }
  });
  return (
    <tr data-lesson={record.id}>
      <td class="tool">{record.toolName}{record.keywords.length ? <small>{record.keywords.join(", ")}</small> : null}</td>
      <td>{record.symptom}{record.cause ? <small>cause: {record.cause}</small> : null}</td>
      <td class="action">
        {draft === null ? record.action : (
          <div class="edit">
            <textarea aria-label="New action" rows={3} value={draft}
              onInput={(event) => setDraft(event.currentTarget.value)} />
            <ErrorBanner error={error} />
            <div class="buttons">
              <button type="button" disabled={busy} onClick={save}>Save</button>
              <button type="button" onClick={() => setDraft(null)}>Cancel</button>
            </div>
          </div>
        )}
      </td>
      <td>{OUTCOMES[record.outcome] ?? "—"}</td>
      <td><time>{time(record.expiresAtUnixNano)}</time></td>
      <td class="number">{record.hitCount}</td>
      <td class="row-actions">
        {draft === null ? <button type="button" onClick={() => setDraft(record.action)}>Edit action</button> : null}
        <button type="button" class="danger" onClick={onDelete}>Delete</button>
      </td>
    </tr>
  );
}
