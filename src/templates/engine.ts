import Handlebars from 'handlebars';
import type { ValidationDetail } from '../http/errors.ts';

/**
 * The template language: Handlebars with its built-in block helpers and `lookup` only. No
 * partials, decorators, custom helpers or prototype access. A template is checked by walking
 * Handlebars' own AST, so what is refused is exactly what Handlebars would have run.
 */

export type TemplatePart = 'subject' | 'html' | 'text';
export type VariableType = 'string' | 'number';
export type TemplateVariable = { key: string; type: VariableType; fallback_value: string | number | null };
export type Values = Record<string, string | number>;

/** The helpers a template may call; everything else Handlebars would look up is a variable. */
const HELPERS = new Set(['if', 'unless', 'each', 'with', 'lookup']);
/** Blocks whose body runs in a new context: names inside them are not the template's variables. */
const CONTEXT_BLOCKS = new Set(['each', 'with']);

const env = Handlebars.create();
env.unregisterHelper('log');

/**
 * Handlebars' parser reports a syntax error only in its message; its jison hook hands over the
 * position too. The parser is shared by every Handlebars instance, and this process has no other.
 */
type ParserHash = { line?: number; loc?: { first_line: number; first_column: number } };
class SyntaxProblem extends Error {
  constructor(message: string, readonly line: number, readonly column: number) { super(message); }
}
Handlebars.parse('');
(Handlebars as unknown as { Parser: { yy: { parseError?: unknown } } }).Parser.yy.parseError = (message: string, hash: ParserHash) => {
  const line = hash.loc?.first_line ?? (hash.line ?? 0) + 1;
  throw new SyntaxProblem(message, line, hash.loc?.first_column ?? 0);
};

/** A template problem as the 422 detail it becomes: where, what, and the line and column. */
export class TemplateProblem extends Error {
  constructor(readonly part: TemplatePart, readonly type: string, message: string, readonly line: number, readonly column: number, readonly variable?: string) {
    super(`${part}, line ${line}, column ${column}: ${message}`);
    // Handlebars counts columns from 0; people and editors count from 1.
  }
  detail(locPrefix: (string | number)[] = ['body']): ValidationDetail {
    return { loc: [...locPrefix, this.part], msg: this.message, type: this.type, ctx: { line: this.line, column: this.column, ...(this.variable ? { name: this.variable } : {}) } };
  }
}

type Node = hbs.AST.Node;
type Scope = { top: boolean; blockParams: string[] };

/**
 * Checks one part of a template against its declared variables: it must parse, use only the
 * built-in helpers, no partials or decorators, and every name it reads from the top-level
 * context must be declared.
 */
export function checkSource(part: TemplatePart, source: string, declared: ReadonlySet<string>): void {
  let ast: hbs.AST.Program;
  try {
    ast = Handlebars.parse(source);
  } catch (err) {
    if (err instanceof SyntaxProblem) throw new TemplateProblem(part, 'template_syntax', firstLine(err.message), err.line, err.column + 1);
    const e = err as { message?: string; lineNumber?: number; column?: number };
    throw new TemplateProblem(part, 'template_syntax', firstLine(e.message ?? 'cannot be parsed').replace(/ - \d+:\d+$/, ''), e.lineNumber ?? 1, (e.column ?? 0) + 1);
  }
  const problem = (node: Node, type: string, message: string, name?: string) =>
    new TemplateProblem(part, type, message, node.loc?.start.line ?? 1, (node.loc?.start.column ?? 0) + 1, name);

  // Scopes from the outermost; a path's depth (`../`) counts back from the innermost.
  const scopes: Scope[] = [{ top: true, blockParams: [] }];

  const path = (p: hbs.AST.PathExpression) => {
    if (p.data) {
      // `@root.x` reads the top-level context; `@index`, `@key`, `@first`, `@last` are the loop's.
      if (p.parts[0] === 'root' && p.parts.length > 1) requireDeclared(p, p.parts[1]!);
      return;
    }
    const scope = scopes[Math.max(0, scopes.length - 1 - p.depth)]!;
    const head = p.parts[0];
    if (head === undefined) return; // `this` or `..`
    if (p.depth === 0 && scopes.some((s) => s.blockParams.includes(head))) return;
    if (scope.top) requireDeclared(p, head);
  };
  const requireDeclared = (node: Node, name: string) => {
    if (!declared.has(name)) throw problem(node, 'template_variable_undeclared', `"${name}" is not declared in variables`, name);
  };
  const helperName = (node: hbs.AST.MustacheStatement | hbs.AST.BlockStatement | hbs.AST.SubExpression) =>
    node.path.type === 'PathExpression' ? (node.path as hbs.AST.PathExpression).original : undefined;
  const expressions = (node: { params: hbs.AST.Expression[]; hash?: hbs.AST.Hash }) => {
    for (const p of node.params) expression(p);
    for (const pair of node.hash?.pairs ?? []) expression(pair.value);
  };
  const expression = (node: hbs.AST.Expression) => {
    if (node.type === 'PathExpression') return path(node as hbs.AST.PathExpression);
    if (node.type === 'SubExpression') {
      const sub = node as hbs.AST.SubExpression;
      const name = helperName(sub);
      if (!name || !HELPERS.has(name)) throw problem(node, 'template_helper_unknown', `"${name ?? sub.path.type}" is not a built-in helper (if, unless, each, with, lookup)`, name);
      return expressions(sub);
    }
    // Literals: strings, numbers, booleans, null, undefined.
  };
  const program = (prog: hbs.AST.Program | undefined, scope?: Scope) => {
    if (!prog) return;
    if (scope) scopes.push(scope);
    for (const statement of prog.body) visit(statement);
    if (scope) scopes.pop();
  };
  const visit = (node: hbs.AST.Statement) => {
    switch (node.type) {
      case 'ContentStatement':
      case 'CommentStatement':
        return;
      case 'MustacheStatement': {
        const m = node as hbs.AST.MustacheStatement;
        const name = helperName(m);
        const called = m.params.length > 0 || (m.hash?.pairs.length ?? 0) > 0;
        if (called && !(name && HELPERS.has(name))) throw problem(node, 'template_helper_unknown', `"${name ?? m.path.type}" is not a built-in helper (if, unless, each, with, lookup)`, name);
        if (name && HELPERS.has(name) && (m.path as hbs.AST.PathExpression).depth === 0) return expressions(m);
        expression(m.path);
        return expressions(m);
      }
      case 'BlockStatement': {
        const b = node as hbs.AST.BlockStatement;
        const name = helperName(b);
        if (!name || !HELPERS.has(name) || name === 'lookup') {
          throw problem(node, 'template_helper_unknown', `"{{#${name ?? b.path.type}}}" is not a built-in block helper (if, unless, each, with)`, name);
        }
        expressions(b);
        const params = b.program?.blockParams ?? [];
        // `if` and `unless` keep their context, and Handlebars' `../` skips them.
        program(b.program, CONTEXT_BLOCKS.has(name) ? { top: false, blockParams: params } : undefined);
        program(b.inverse);
        return;
      }
      default:
        // Partials ({{> name}}, {{#> name}}) and decorators ({{* name}}) reach outside the template.
        throw problem(node, 'template_unsupported', /^Partial/.test(node.type) ? 'partials are not supported' : 'decorators are not supported');
    }
  };

  program(ast);
  // Compiling catches what the AST alone does not show (helpers Handlebars itself refuses).
  try {
    env.precompile(source, compileOptions(part));
  } catch (err) {
    const e = err as { message?: string; lineNumber?: number; column?: number };
    throw new TemplateProblem(part, 'template_syntax', firstLine(e.message ?? 'does not compile').replace(/ - \d+:\d+$/, ''), e.lineNumber ?? 1, (e.column ?? 0) + 1);
  }
}

const firstLine = (s: string) => s.split('\n')[0]!;

/** `{{x}}` escapes in HTML only; subject and text take values as they are. */
const compileOptions = (part: TemplatePart) => ({ knownHelpersOnly: true, knownHelpers: { log: false }, noEscape: part !== 'html', strict: false });

export type Compiled = (values: Values) => string;

export function compilePart(part: TemplatePart, source: string): Compiled {
  const fn = env.compile(source, compileOptions(part));
  return (values) => fn(values, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
}

/** Rendering went past what a message may hold. */
export class RenderTooLarge extends Error {
  constructor(readonly sizeBytes: number) { super('rendered output too large'); }
}

/**
 * The running render's budget. Rendering is synchronous, so one slot is enough. Each `{{#each}}`
 * stops once its own output passes the message limit, and all of them together after
 * MAX_ITERATIONS, so loops nested over the variables end early rather than building output no
 * message could hold.
 */
let budget: { limit: number; iterations: number } | undefined;
const MAX_ITERATIONS = 100_000;

type HelperOptions = { fn: (context: unknown, options?: unknown) => string } & Record<string, unknown>;
const builtinEach = env.helpers.each as (this: unknown, context: unknown, options: HelperOptions) => string;
env.registerHelper('each', function (this: unknown, context: unknown, options: HelperOptions) {
  const fn = options?.fn;
  if (!fn) return builtinEach.call(this, context, options);
  // What this loop has produced so far: it all ends up in the output, so past the limit it stops.
  let produced = 0;
  return builtinEach.call(this, context, {
    ...options,
    fn: (ctx: unknown, opts?: unknown) => {
      if (budget && ++budget.iterations > MAX_ITERATIONS) throw new RenderTooLarge(budget.limit + 1);
      const out = fn(ctx, opts);
      produced += out.length;
      if (budget && produced > budget.limit) throw new RenderTooLarge(produced);
      return out;
    },
  });
});

/**
 * Runs compiled parts with a shared budget; `limit` counts characters, a lower bound on bytes.
 * Throws RenderTooLarge past it, and TemplateRuntimeError for anything Handlebars throws.
 */
export function renderParts<T extends Partial<Record<TemplatePart, Compiled | null>>>(parts: T, values: Values, limit: number): { [K in keyof T]: string | null } {
  budget = { limit, iterations: 0 };
  try {
    const out = {} as Record<string, string | null>;
    let total = 0;
    for (const [name, fn] of Object.entries(parts) as [string, Compiled | null | undefined][]) {
      if (!fn) { out[name] = null; continue; }
      const s = fn(values);
      total += s.length;
      if (total > limit) throw new RenderTooLarge(total);
      out[name] = s;
    }
    return out as { [K in keyof T]: string | null };
  } catch (err) {
    // V8 refuses strings past about 512 MiB: that is a message too large, not a crash.
    if (err instanceof RangeError) throw new RenderTooLarge(limit + 1);
    if (err instanceof RenderTooLarge) throw err;
    throw new TemplateRuntimeError((err as Error)?.message ?? String(err));
  } finally {
    budget = undefined;
  }
}

export class TemplateRuntimeError extends Error {}

/** Names of Object.prototype members: never variable keys, so no declared name shadows them. */
const RESERVED_KEYS = new Set(Object.getOwnPropertyNames(Object.prototype));
export const VARIABLE_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const isReservedKey = (key: string) => RESERVED_KEYS.has(key);

/**
 * The values a render sees: each declared variable's given value or its fallback, on an object
 * without a prototype. Problems are returned by key: missing (no value, no fallback) or the
 * wrong type.
 */
export function bindValues(variables: TemplateVariable[], given: Record<string, unknown> | undefined): { values: Values; problems: { key: string; type: string; msg: string }[] } {
  const values = Object.create(null) as Values;
  const problems: { key: string; type: string; msg: string }[] = [];
  for (const v of variables) {
    const value = given && Object.hasOwn(given, v.key) ? given[v.key] : undefined;
    if (value === undefined || value === null) {
      if (v.fallback_value === null || v.fallback_value === undefined) problems.push({ key: v.key, type: 'missing', msg: `Variable ${v.key} is required: it has no fallback_value` });
      else values[v.key] = v.fallback_value;
      continue;
    }
    if (v.type === 'number' ? typeof value !== 'number' || !Number.isFinite(value) : typeof value !== 'string') {
      problems.push({ key: v.key, type: v.type === 'number' ? 'float_type' : 'string_type', msg: `Variable ${v.key} must be a ${v.type}` });
      continue;
    }
    if (typeof value === 'string' && (value.includes('\0') || LONE_SURROGATE.test(value))) {
      problems.push({ key: v.key, type: 'string_invalid', msg: `Variable ${v.key} must not contain NUL or unpaired surrogate characters` });
      continue;
    }
    values[v.key] = value as string | number;
  }
  return { values, problems };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
