/**
 * memsvc's dashboard: the page at the HTTP listener's `/`. Hash routes (#/overview, #/sessions,
 * #/sessions/<id>, #/lessons) keep the back button working and never carry the token;
 * when the server refuses a call for want of a token, the page asks for one and keeps
 * it in memory only (api.ts). A token that may list the server's tenants (an admin's) gets
 * a tenant picker; every call then acts for the tenant picked.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { actFor, actingFor, type Failure, shards, signedIn, signIn, signOut } from "./api.js";
import { Lessons } from "./lessons.js";
import { Overview } from "./overview.js";
import { Session } from "./session.js";
import { Sessions } from "./sessions.js";
import { Refused } from "./ui.js";

type Route = { view: "overview" } | { view: "sessions" } | { view: "session"; id: string } | { view: "lessons" };

function route(hash: string): Route {
  const [, first, second] = hash.replace(/^#/, "").split("/");
  if (first === "lessons") {
    return { view: "lessons" };
  }
  if (first === "overview") {
    return { view: "overview" };
  }
  if (first === "sessions" && second) {
    return { view: "session", id: decodeURIComponent(second) };
  }
  return { view: "sessions" };
}

function useRoute(): Route {
  const [current, setCurrent] = useState(route(window.location.hash));
  useEffect(() => {
    const changed = () => setCurrent(route(window.location.hash));
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  return current;
}

function Login({ refusal, onSignIn }: { refusal: Failure; onSignIn: (token: string) => void }) {
  const [token, setToken] = useState("");
  return (
    <section class="login">
      <h1>Sign in</h1>
      <div class="error" role="alert">
        <strong>{refusal.message}</strong>
        <span class="code">{refusal.code}{refusal.reason ? ` · ${refusal.reason}` : ""}</span>
      </div>
      <p>This server was started with a <code>token_file</code> or a <code>tenants_file</code>. Enter your bearer token
        (a tenant's shows that tenant's sessions and lessons only): this tab keeps it in memory
        only, so a reload or a new tab asks again.</p>
      <form onSubmit={(event) => {
        event.preventDefault();
        onSignIn(token);
      }}>
        <label>
          Bearer token
          <input type="password" autocomplete="off" value={token} required
            onInput={(event) => setToken(event.currentTarget.value)} />
        </label>
        <button type="submit">Sign in</button>
      </form>
    </section>
  );
}

/** The tenants this token may list (an admin's); nothing for any other token or a server of one tenant. */
function TenantPicker({ onPick }: { onPick: () => void }) {
  const [tenants, setTenants] = useState<string[]>([]);
  useEffect(() => {
    // Refused (not an admin, not signed in yet): no picker; the views say why they are refused.
    shards.listTenants({}).then((reply) => setTenants(reply.tenants), () => setTenants([]));
  }, []);
  if (tenants.length < 2) {
    return null;
  }
  return (
    <label class="tenant">
      Tenant
      <select value={actingFor()} onChange={(event) => {
        actFor(event.currentTarget.value);
        onPick();
      }}>
        {tenants.map((name) => <option key={name} value={name}>{name}</option>)}
      </select>
    </label>
  );
}

function App() {
  const current = useRoute();
  const [refusal, setRefusal] = useState<Failure | null>(null);
  // Bumped at each sign-in, sign-out and tenant pick: the views load again with the new token or tenant.
  const [session, setSession] = useState(0);

  const view = current.view === "lessons" ? <Lessons /> : current.view === "overview" ? <Overview />
    : current.view === "session" ? <Session key={current.id} id={current.id} /> : <Sessions />;
  return (
    <Refused.Provider value={setRefusal}>
      <header>
        <a class="brand" href="#/sessions">memsvc</a>
        <nav>
          <a href="#/overview" aria-current={current.view === "overview" ? "page" : undefined}>Overview</a>
          <a href="#/sessions" aria-current={current.view === "sessions" || current.view === "session" ? "page" : undefined}>Sessions</a>
          <a href="#/lessons" aria-current={current.view === "lessons" ? "page" : undefined}>Lessons</a>
        </nav>
        <TenantPicker key={session} onPick={() => setSession(session + 1)} />
        {signedIn() ? (
          <button type="button" class="link" onClick={() => {
            signOut();
            setSession(session + 1);
          }}>Sign out</button>
        ) : null}
      </header>
      <main key={session}>
        {refusal ? <Login refusal={refusal} onSignIn={(token) => {
          signIn(token);
          setRefusal(null);
          setSession(session + 1);
        }} /> : view}
      </main>
    </Refused.Provider>
  );
}

render(<App />, document.getElementById("app")!);
