// Forms generated from JSON Schema: tool inputs (objects, arrays, enums, defaults, $ref to $defs), elicitation
// requests (flat primitives, single and multi-select enums), prompt and template arguments (strings).
// buildForm(schema) returns {el, value()}: value() gives {ok, value} or {ok: false, error} (the first problem,
// also shown next to its field). Anything the generator does not know is edited as JSON.
import { h, jsonText, uid } from "./dom.js";

const MAX_DEPTH = 8;

function deref(schema, root, depth) {
  let s = schema;
  for (let i = 0; i < 16 && s && typeof s === "object" && typeof s.$ref === "string"; i += 1) {
    const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(s.$ref);
    if (!m || !root || !root[m[1]] || typeof root[m[1]] !== "object") return null;
    const name = decodeURIComponent(m[2].replace(/~1/g, "/").replace(/~0/g, "~"));
    const target = Object.prototype.hasOwnProperty.call(root[m[1]], name) ? root[m[1]][name] : null;
    const { $ref, ...rest } = s;
    s = target && typeof target === "object" ? { ...target, ...rest } : null;
  }
  return s && typeof s === "object" ? s : depth > 0 ? {} : s;
}

function typeOf(schema) {
  let t = schema.type;
  if (Array.isArray(t)) t = t.find((x) => x !== "null");
  if (!t) {
    if (schema.properties) return "object";
    if (schema.items) return "array";
    if (Array.isArray(schema.enum)) return "enum";
  }
  return t;
}

function choicesOf(schema) {
  // [{value, title}] for enum / oneOf-anyOf of consts; null otherwise
  if (Array.isArray(schema.enum)) {
    const titles = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((v, i) => ({ value: v, title: titles[i] !== undefined ? String(titles[i]) : String(v) }));
  }
  const opts = schema.oneOf || schema.anyOf;
  if (Array.isArray(opts) && opts.length && opts.every((o) => o && typeof o === "object" && "const" in o)) {
    return opts.map((o) => ({ value: o.const, title: o.title !== undefined ? String(o.title) : String(o.const) }));
  }
  return null;
}

function nullableInner(schema, root, depth) {
  // anyOf/oneOf [X, {type: null}] -> X
  const opts = schema.anyOf || schema.oneOf;
  if (!Array.isArray(opts) || opts.length !== 2) return null;
  const rest = opts.filter((o) => !(o && o.type === "null"));
  if (rest.length !== 1) return null;
  const inner = deref(rest[0], root, depth);
  if (!inner) return null;
  return { ...inner, title: inner.title || schema.title, description: inner.description || schema.description, default: schema.default ?? inner.default };
}

function wrap(label, help, control, id, extra = null) {
  const err = h("div", { class: "err", id: `${id}-err`, "aria-live": "polite" });
  const field = h("div", { class: "field" }, h("label", { for: id }, label), control, extra, help ? h("div", { class: "help", id: `${id}-help`, text: help }) : null, err);
  if (help) control.setAttribute("aria-describedby", `${id}-help ${id}-err`);
  else control.setAttribute("aria-describedby", `${id}-err`);
  const reset = () => {
    err.textContent = "";
    field.classList.remove("invalid");
  };
  control.addEventListener("input", reset);
  control.addEventListener("change", reset);
  return { field, err };
}

function fail(ctx, message) {
  ctx.err.textContent = message;
  ctx.field.classList.add("invalid");
  return { ok: false, error: message, focus: ctx.focus };
}

function okv(ctx, value, present = true) {
  ctx.err.textContent = "";
  ctx.field.classList.remove("invalid");
  return { ok: true, present, value };
}

function labelText(name, schema, required) {
  const title = schema.title ? `${schema.title}` : name;
  return `${title}${required ? " *" : ""}`;
}

// One field; returns {el, get()} where get() -> {ok, present, value} | {ok:false, error}
export function buildField(name, rawSchema, opts = {}) {
  const root = opts.root || rawSchema;
  const depth = opts.depth || 0;
  const required = !!opts.required;
  let schema = deref(rawSchema, root, depth);
  if (schema === null) return jsonField(name, {}, required, opts, "its $ref cannot be resolved: edit it as JSON");
  if (typeof schema !== "object" || Array.isArray(schema)) schema = {}; // the schema `true` (any value), or not a schema
  const nullable = nullableInner(schema, root, depth);
  if (nullable) schema = nullable;
  if (depth > MAX_DEPTH) return jsonField(name, schema, required, opts, "nested too deeply: edit it as JSON");
  const choices = choicesOf(schema);
  const kind = choices ? "choice" : typeOf(schema);
  const help = [schema.description, opts.extraHelp].filter(Boolean).join(" ") || null;
  const id = uid("in");
  const hasDefault = Object.prototype.hasOwnProperty.call(schema, "default");

  if ("const" in schema && !choices) {
    const el = h("div", { class: "field" }, h("span", { class: "muted" }, `${name} = `, h("code", { text: jsonText(schema.const) })));
    return { el, get: () => ({ ok: true, present: true, value: schema.const }) };
  }
  if (kind === "choice") {
    const select = h("select", { id, name, required });
    if (!required || !hasDefault) select.append(h("option", { value: "", text: required ? "(choose)" : "(not set)" }));
    choices.forEach((c, i) => select.append(h("option", { value: String(i), text: c.title === String(c.value) ? c.title : `${c.title} (${String(c.value)})` })));
    if (hasDefault) {
      const at = choices.findIndex((c) => JSON.stringify(c.value) === JSON.stringify(schema.default));
      if (at >= 0) select.value = String(at);
    }
    const ctx = wrap(labelText(name, schema, required), help, select, id);
    ctx.focus = select;
    return {
      el: ctx.field,
      get: () => {
        if (select.value === "") return required ? fail(ctx, "choose a value") : okv(ctx, undefined, false);
        return okv(ctx, choices[Number(select.value)].value);
      },
    };
  }
  if (kind === "boolean") {
    if (!required && !hasDefault) {
      const select = h("select", { id, name }, h("option", { value: "", text: "(not set)" }), h("option", { value: "true", text: "true" }), h("option", { value: "false", text: "false" }));
      const ctx = wrap(labelText(name, schema, required), help, select, id);
      return { el: ctx.field, get: () => (select.value === "" ? okv(ctx, undefined, false) : okv(ctx, select.value === "true")) };
    }
    const box = h("input", { type: "checkbox", id, name, checked: hasDefault ? !!schema.default : false });
    const ctx = wrap(labelText(name, schema, required), help, box, id);
    return { el: ctx.field, get: () => okv(ctx, box.checked) };
  }
  if (kind === "integer" || kind === "number") {
    const input = h("input", { type: "number", id, name, step: kind === "integer" ? "1" : "any", required, inputmode: kind === "integer" ? "numeric" : "decimal" });
    if (typeof schema.minimum === "number") input.min = String(schema.minimum);
    if (typeof schema.maximum === "number") input.max = String(schema.maximum);
    if (hasDefault && schema.default !== null) input.value = String(schema.default);
    const ctx = wrap(labelText(name, schema, required), help, input, id);
    ctx.focus = input;
    return {
      el: ctx.field,
      get: () => {
        const raw = input.value.trim();
        if (raw === "") return required ? fail(ctx, "a number is required") : okv(ctx, undefined, false);
        const n = Number(raw);
        if (!Number.isFinite(n)) return fail(ctx, "not a number");
        if (kind === "integer" && !Number.isInteger(n)) return fail(ctx, "a whole number is required");
        if (typeof schema.minimum === "number" && n < schema.minimum) return fail(ctx, `at least ${schema.minimum}`);
        if (typeof schema.maximum === "number" && n > schema.maximum) return fail(ctx, `at most ${schema.maximum}`);
        return okv(ctx, n);
      },
    };
  }
  if (kind === "string") {
    const formats = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
    const long = (schema.maxLength === undefined || schema.maxLength > 200) && /text|content|body|message|prompt|query|code/i.test(name) && !schema.format;
    const input = long ? h("textarea", { id, name, required, rows: "3" }) : h("input", { type: formats[schema.format] || "text", id, name, required, autocomplete: "off" });
    if (typeof schema.minLength === "number") input.minLength = schema.minLength;
    if (typeof schema.maxLength === "number") input.maxLength = schema.maxLength;
    if (typeof schema.pattern === "string" && !long) input.pattern = schema.pattern;
    if (hasDefault && typeof schema.default === "string") input.value = schema.default;
    const datalist = opts.complete ? attachCompletion(input, opts.complete, name) : null;
    const ctx = wrap(labelText(name, schema, required), help, input, id, datalist);
    ctx.focus = input;
    return {
      el: ctx.field,
      input,
      get: () => {
        let raw = input.value;
        if (raw === "") return required ? fail(ctx, "required") : okv(ctx, undefined, false);
        if (schema.format === "date-time" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(raw)) raw = new Date(raw).toISOString();
        if (typeof schema.minLength === "number" && raw.length < schema.minLength) return fail(ctx, `at least ${schema.minLength} characters`);
        if (typeof schema.maxLength === "number" && raw.length > schema.maxLength) return fail(ctx, `at most ${schema.maxLength} characters`);
        if (typeof schema.pattern === "string") {
          try {
            if (!new RegExp(schema.pattern, "u").test(raw)) return fail(ctx, `must match ${schema.pattern}`);
          } catch (e) {
            /* a pattern the browser cannot read: the server checks it */
          }
        }
        return okv(ctx, raw);
      },
    };
  }
  if (kind === "array") {
    const items = deref(schema.items || {}, root, depth + 1) || {};
    const itemChoices = choicesOf(items);
    if (itemChoices) return multiChoice(name, schema, itemChoices, required, help);
    return arrayField(name, schema, items, required, help, { ...opts, depth: depth + 1 });
  }
  if (kind === "object") {
    const props = schema.properties && typeof schema.properties === "object" ? schema.properties : null;
    if (!props) return jsonField(name, schema, required, opts, "an object: edit it as JSON");
    const form = objectFields(schema, { root, depth: depth + 1, complete: opts.complete });
    const legend = h("legend", { text: labelText(name, schema, required) });
    const fs = h("fieldset", {}, legend, help ? h("div", { class: "help", text: help }) : null, form.el);
    return {
      el: fs,
      get: () => {
        const r = form.get();
        if (!r.ok) return r;
        const present = required || Object.keys(r.value).length > 0;
        return { ok: true, present, value: r.value };
      },
    };
  }
  return jsonField(name, schema, required, opts, kind ? `type ${kind}: edit it as JSON` : "any JSON value");
}

function multiChoice(name, schema, choices, required, help) {
  const id = uid("in");
  const wanted = Array.isArray(schema.default) ? schema.default.map((v) => JSON.stringify(v)) : [];
  const boxes = choices.map((c) => h("input", { type: "checkbox", value: "", checked: wanted.includes(JSON.stringify(c.value)) }));
  const group = h("fieldset", { id }, h("legend", { text: labelText(name, schema, required) }), help ? h("div", { class: "help", text: help }) : null,
    choices.map((c, i) => h("label", { class: "check" }, boxes[i], c.title === String(c.value) ? c.title : `${c.title} (${String(c.value)})`)));
  const err = h("div", { class: "err", "aria-live": "polite" });
  group.append(err);
  const ctx = { field: group, err, focus: boxes[0] };
  return {
    el: group,
    get: () => {
      const value = choices.filter((c, i) => boxes[i].checked).map((c) => c.value);
      if (typeof schema.minItems === "number" && value.length < schema.minItems) return fail(ctx, `choose at least ${schema.minItems}`);
      if (typeof schema.maxItems === "number" && value.length > schema.maxItems) return fail(ctx, `choose at most ${schema.maxItems}`);
      if (!value.length && !required) return okv(ctx, undefined, false);
      return okv(ctx, value);
    },
  };
}

function arrayField(name, schema, items, required, help, opts) {
  const list = h("div", { class: "array-items" });
  const rows = [];
  const legend = h("legend", { text: labelText(name, schema, required) });
  const err = h("div", { class: "err", "aria-live": "polite" });
  const fs = h("fieldset", {}, legend, help ? h("div", { class: "help", text: help }) : null, list);
  const addItem = (value) => {
    const f = buildField(`${name}[${rows.length + 1}]`, value === undefined ? items : { ...items, default: value }, { ...opts, required: true });
    const row = { f };
    const remove = h("button", { type: "button", class: "secondary", text: "Remove", "aria-label": `Remove item of ${name}`, onclick: () => {
      const at = rows.indexOf(row);
      if (at >= 0) rows.splice(at, 1);
      row.el.remove();
    } });
    row.el = h("div", { class: "array-item" }, f.el, remove);
    rows.push(row);
    list.append(row.el);
  };
  fs.append(h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", text: `Add an item to ${name}`, onclick: () => addItem() })), err);
  if (Array.isArray(schema.default)) schema.default.forEach((v) => addItem(v));
  const ctx = { field: fs, err };
  return {
    el: fs,
    get: () => {
      const value = [];
      for (const row of rows) {
        const r = row.f.get();
        if (!r.ok) return r;
        value.push(r.value);
      }
      if (typeof schema.minItems === "number" && value.length < schema.minItems) return fail(ctx, `at least ${schema.minItems} items`);
      if (typeof schema.maxItems === "number" && value.length > schema.maxItems) return fail(ctx, `at most ${schema.maxItems} items`);
      if (!value.length && !required && !Array.isArray(schema.default)) return okv(ctx, undefined, false);
      return okv(ctx, value);
    },
  };
}

function jsonField(name, schema, required, opts, note) {
  const id = uid("in");
  const area = h("textarea", { id, name, rows: "3", spellcheck: "false" });
  if (Object.prototype.hasOwnProperty.call(schema || {}, "default")) area.value = jsonText(schema.default);
  const help = [schema && schema.description, `(${note})`].filter(Boolean).join(" ");
  const ctx = wrap(labelText(name, schema || {}, required), help, area, id);
  ctx.focus = area;
  return {
    el: ctx.field,
    get: () => {
      const raw = area.value.trim();
      if (raw === "") return required ? fail(ctx, "required (JSON)") : okv(ctx, undefined, false);
      try {
        return okv(ctx, JSON.parse(raw));
      } catch (e) {
        return fail(ctx, `not valid JSON: ${e.message}`);
      }
    },
  };
}

function objectFields(schema, opts) {
  const props = schema.properties && typeof schema.properties === "object" && !Array.isArray(schema.properties) ? schema.properties : {};
  const requiredSet = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(props)
    .filter(([, sub]) => sub !== false) // the schema `false`: the argument may never be given
    .map(([name, sub]) => ({ name, f: buildField(name, sub, { ...opts, required: requiredSet.has(name) }) }));
  const el = h("div", { class: "fields" });
  fields.forEach(({ f }) => el.append(f.el));
  return {
    el,
    fields,
    get: () => {
      const value = {};
      let first = null;
      for (const { name, f } of fields) {
        const r = f.get();
        if (!r.ok) {
          first = first || r;
          continue;
        }
        if (r.present !== false && r.value !== undefined) value[name] = r.value;
      }
      return first || { ok: true, value };
    },
  };
}

// The top-level form of an object schema (tool inputs, elicitations).
export function buildForm(schema, opts = {}) {
  const root = schema && typeof schema === "object" ? schema : {};
  const form = objectFields({ type: "object", ...root }, { root, depth: 0, complete: opts.complete });
  const el = h("div", { class: "schema-fields" }, form.el);
  if (!Object.keys(root.properties || {}).length) el.append(h("p", { class: "hint", text: "No arguments." }));
  return {
    el,
    fields: form.fields,
    value: () => {
      const r = form.get();
      if (!r.ok && r.focus) r.focus.focus();
      return r;
    },
  };
}

// A datalist for a text input (the caller puts it in the page), filled as the person types by
// complete(name, value) -> [values].
export function attachCompletion(input, complete, name) {
  const listId = uid("dl");
  const list = h("datalist", { id: listId });
  input.setAttribute("list", listId);
  let timer = null;
  let asked = 0;
  const ask = () => {
    const mine = ++asked;
    Promise.resolve(complete(name, input.value)).then((values) => {
      if (mine !== asked || !Array.isArray(values)) return;
      while (list.firstChild) list.removeChild(list.firstChild);
      values.slice(0, 100).forEach((v) => list.append(h("option", { value: String(v) })));
      input.dataset.completions = String(values.length);
    }).catch(() => {});
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(ask, 150);
  });
  input.addEventListener("focus", ask, { once: true });
  return list;
}
