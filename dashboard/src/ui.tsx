/** Pieces every view shares: calling the server, showing its errors, asking before a destructive action. */
import { createContext, type ComponentChildren } from "preact";
import { useContext, useEffect, useRef, useState } from "preact/hooks";
import { type Failure, failure } from "./api.js";

/** Told when the server refuses a call for want of the right token: the app then asks for one. */
export const Refused = createContext<(refusal: Failure) => void>(() => undefined);

/** Runs calls for one view: keeps the last error (as the server worded it) and whether a call is running. */
export function useCall() {
  const refused = useContext(Refused);
  const [error, setError] = useState<Failure | null>(null);
  const [busy, setBusy] = useState(false);
  async function run<T>(call: () => Promise<T>): Promise<T | undefined> {
    setBusy(true);
    setError(null);
    try {
      return await call();
    } catch (caught) {
      const refusal = failure(caught);
      if (refusal.unauthenticated) {
        refused(refusal);
      } else {
        setError(refusal);
      }
      return undefined;
    } finally {
      setBusy(false);
    }
  }
  return { error, busy, run };
}

export function ErrorBanner({ error }: { error: Failure | null }) {
  if (!error) {
    return null;
  }
  return (
    <div class="error" role="alert">
      <strong>{error.message}</strong>
      <span class="code">{error.code}{error.reason ? ` · ${error.reason}` : ""}</span>
    </div>
  );
}

export function Notice({ text }: { text: string }) {
  return text ? <div class="notice" role="status">{text}</div> : null;
}

/** A destructive action waiting for the person to say yes. */
export interface Question {
  title: string;
  detail: string;
  confirm: string;
  then: () => void;
}

export function Confirm({ question, onClose }: { question: Question; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  return (
    <dialog ref={dialog} class="confirm" aria-labelledby="confirm-title" onClose={onClose}>
      <h2 id="confirm-title">{question.title}</h2>
      <p>{question.detail}</p>
      <div class="buttons">
        <button type="button" onClick={() => dialog.current?.close()}>Cancel</button>
        <button type="button" class="danger" onClick={() => {
          question.then();
          dialog.current?.close();
        }}>{question.confirm}</button>
      </div>
    </dialog>
  );
}

/** The confirmation a view may be showing, and a way to ask. */
export function useConfirm(): [ComponentChildren, (question: Question) => void] {
  const [question, setQuestion] = useState<Question | null>(null);
  const shown = question ? <Confirm question={question} onClose={() => setQuestion(null)} /> : null;
  return [shown, setQuestion];
}
