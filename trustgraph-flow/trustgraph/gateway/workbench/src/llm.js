// Which LLM answers, from the gateway's GET /api/v1/llm: when it is the bundled demo
// model (or none at all), a notice above everything says so and how to point the
// platform at a real LLM. The answers' own final records name the model too.
export async function showLlmNotice(element, token) {
  let llm;
  try {
    const response = await fetch("/api/v1/llm", {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
    });
    if (!response.ok) return; // an older gateway: nothing to say
    llm = await response.json();
  } catch {
    return;
  }
  element.textContent = llm.notice || "";
  element.hidden = !llm.notice;
  element.dataset.provider = llm.provider || "none"; // what the page was told
}
