// The conversation survives reloading the tab, and is forgotten with it
// (sessionStorage, like the token): finished turns as AnswerView.kept() gives them,
// and the agent's session id, so an agent conversation continues after a reload.
const TURNS = "tg-workbench-turns";
const SESSION = "tg-workbench-agent-session";
const MAX_TURNS = 50;

export function keptTurns() {
  try {
    return JSON.parse(sessionStorage.getItem(TURNS) || "[]");
  } catch {
    return [];
  }
}

export function keep(turn) {
  const turns = [...keptTurns(), turn].slice(-MAX_TURNS);
  try {
    sessionStorage.setItem(TURNS, JSON.stringify(turns));
  } catch {
    // Storage full: the conversation stays on the page, only a reload loses it.
  }
}

export function agentSession(renew = false) {
  let id = sessionStorage.getItem(SESSION);
  if (!id || renew) {
    id = crypto.randomUUID ? crypto.randomUUID()
      : `s-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    sessionStorage.setItem(SESSION, id);
  }
  return id;
}

export function forgetTurns() {
  sessionStorage.removeItem(TURNS);
}
