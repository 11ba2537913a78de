// What the user chose (user, collection, flow, limits, options), kept in
// localStorage so a reload keeps it. A limit left empty is the flow's own. The form fields in index.html carry the names
// and defaults; this module only reads and writes them.

const KEY = "tg-workbench-settings";

export function bindSettings(form) {
  const saved = JSON.parse(localStorage.getItem(KEY) || "{}");
  for (const field of form.elements) {
    if (!field.name || !(field.name in saved)) continue;
    if (field.type === "checkbox") field.checked = saved[field.name];
    else if (field.tagName === "SELECT") choose(field, saved[field.name]);
    else field.value = saved[field.name] ?? "";
  }
  form.addEventListener("submit", (event) => event.preventDefault());
  form.addEventListener("change", () => localStorage.setItem(KEY, JSON.stringify(read(form))));
  return () => read(form);
}

function read(form) {
  const values = {};
  for (const field of form.elements) {
    if (!field.name) continue;
    if (field.type === "checkbox") values[field.name] = field.checked;
    // An empty number is the flow's own value: left out of requests.
    else if (field.type === "number") values[field.name] = field.value === "" ? undefined
      : Number(field.value);
    else values[field.name] = field.value.trim();
  }
  return values;
}

// A select keeps a saved choice it has no option for yet (the flows are listed later).
function choose(select, value) {
  if (![...select.options].some((option) => option.value === value)) {
    select.add(new Option(value, value));
  }
  select.value = value;
}
