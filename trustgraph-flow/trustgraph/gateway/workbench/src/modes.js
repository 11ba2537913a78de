// The four ways to ask, as docs/protocol.md §2 spells them: which service and what
// request (reader.js reads the answers). Also: which of them this stack runs.

export const MODES = {
  document: {
    label: "Document",
    service: "document-rag",
    request: (query, s) => ({
      query, user: s.user, collection: s.collection, streaming: true,
      "doc-limit": s.doc_limit,
      "optimize-query": s.optimize_query, subqueries: s.subqueries,
    }),
  },
  graph: {
    label: "Graph",
    service: "graph-rag",
    request: (query, s) => ({
      query, user: s.user, collection: s.collection, streaming: true,
      "entity-limit": s.entity_limit, "triple-limit": s.triple_limit,
      "max-subgraph-size": s.max_subgraph_size, "max-path-length": s.max_path_length,
      "optimize-query": s.optimize_query, subqueries: s.subqueries,
    }),
  },
  lazy: {
    label: "Lazy",
    service: "lazy-rag",
    request: (query, s) => ({
      query, user: s.user, collection: s.collection, streaming: true,
      max_entities: s.max_entities, max_hops: s.max_hops,
      use_communities: s.use_communities,
    }),
  },
  agent: {
    label: "Agent",
    service: "agent",
    request: (question, s, session) => ({
      question, user: s.user, collection: s.collection, streaming: true,
      session_id: session,
    }),
  },
};

// Errors that mean "this stack does not run that service", not "this request failed".
export const ABSENT = new Set(["unknown-service", "no-service", "mode-unavailable"]);

// Which modes this stack answers. A request the service's model must refuse
// (`streaming` is not a boolean) is cheap and answered at once: `bad-request` means
// the gateway knows the service; `unknown-service` means it does not. LazyRAG is
// also switched off by configuration, which its status endpoint reports.
export async function probeModes(gateway, token) {
  const entries = await Promise.all(Object.entries(MODES).map(async ([mode, spec]) => {
    const handle = gateway.request(spec.service, { streaming: "probe" });
    try {
      await handle.done;
      return [mode, { on: true }];
    } catch (error) {
      if (ABSENT.has(error.type)) return [mode, { on: false, why: absence(spec.service, error) }];
      if (mode === "lazy") return [mode, await lazyStatus(token)];
      return [mode, { on: true }];
    } finally {
      handle.cancel();
    }
  }));
  return Object.fromEntries(entries);
}

// Why a mode is off, in a few words (the gateway's own message lists every service).
export function absence(service, error) {
  if (error.type === "unknown-service") return `this gateway has no ${service} service`;
  if (error.type === "no-service") return `no ${service} processor is running`;
  return error.message;
}

async function lazyStatus(token) {
  try {
    const response = await fetch("/api/v1/lazy-rag/status", {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
    });
    if (response.status === 404) {
      return { on: false, why: "this gateway has no LazyRAG endpoint (/api/v1/lazy-rag/status: 404)" };
    }
    // The LazyRAG endpoints answer in their envelope: {"data": {...}, "meta": {...}}.
    const status = (await response.json().catch(() => ({}))).data || {};
    if (status.enabled === false) {
      return { on: false, why: status.message || "LazyRAG is disabled (LAZY_RAG_ENABLED)" };
    }
    return { on: true };
  } catch {
    return { on: true }; // the status is a hint; asking will tell
  }
}
