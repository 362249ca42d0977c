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
 * context must be declared. Answers the part compiled.
 */
export function checkSource(part: TemplatePart, source: string, declared: ReadonlySet<string>): CompiledPart {
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
    return compilePart(part, source);
  } catch (err) {
    const e = err as { message?: string; lineNumber?: number; column?: number };
    throw new TemplateProblem(part, 'template_syntax', firstLine(e.message ?? 'does not compile').replace(/ - \d+:\d+$/, ''), e.lineNumber ?? 1, (e.column ?? 0) + 1);
  }
}

const firstLine = (s: string) => s.split('\n')[0]!;

/** `{{x}}` escapes in HTML only; subject and text take values as they are. */
const compileOptions = (part: TemplatePart) => ({ knownHelpersOnly: true, knownHelpers: { log: false }, noEscape: part !== 'html', strict: false });

/** Rendering went past what a message may hold. */
export class RenderTooLarge extends Error {
  constructor(readonly sizeBytes: number) { super('rendered output too large'); }
}

/**
 * The running render's budget. Rendering is synchronous, so one slot is enough. Every piece of
 * output is charged as it is appended (see BudgetCompiler), so a render stops as soon as its
 * output passes the limit, whatever the template's shape. Loops are also bounded in turns, all of
 * them together, so loops that produce nothing still end.
 */
let budget: { limit: number; used: number; iterations: number; maxIterations: number } | undefined;
const MAX_ITERATIONS = 100_000;

/** Charges one appended piece of output to the running render; called from compiled templates. */
function charge(piece: unknown): unknown {
  if (budget) {
    budget.used += typeof piece === 'string' ? Buffer.byteLength(piece) : Buffer.byteLength(String(piece));
    if (budget.used > budget.limit) throw new RenderTooLarge(budget.used);
  }
  return piece;
}
/**
 * Handlebars' escapeExpression, with the same characters and entities, done with native
 * replaceAll instead of one JavaScript callback per character: a value dense in `&` escapes
 * several times faster, and the output budget is reached sooner.
 */
const NEEDS_ESCAPE = /[&<>"'`=]/;
function escapeHtml(value: unknown): string {
  if (typeof value !== 'string') {
    if (value && typeof (value as { toHTML?: unknown }).toHTML === 'function') return (value as { toHTML(): string }).toHTML();
    if (value === null || value === undefined) return '';
    if (!value) return `${value as string}`;
    value = `${value as string}`;
  }
  const s = value as string;
  if (!NEEDS_ESCAPE.test(s)) return s;
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;')
    .replaceAll("'", '&#x27;').replaceAll('`', '&#x60;').replaceAll('=', '&#x3D;');
}

// Reached by compiled code through the helpers object, under a name no template can call:
// helpers are limited to the built-ins (checkSource), and with knownHelpersOnly a plain {{name}} is
// a context lookup. An object, not a function, so Handlebars passes it through unwrapped.
const CHARGE_HELPER = 'budget charge';
env.registerHelper(CHARGE_HELPER, { charge, escape: escapeHtml } as unknown as Handlebars.HelperDelegate);

/**
 * Handlebars' code generator with one change: every append to a template's output goes through
 * `charge` first, except the append of a block's result, whose pieces were charged as the block
 * built them. So the bytes charged are exactly the bytes output, counted as they accumulate.
 */
type Opcode = { opcode: string };
type CompilerClass = { new (): Record<string, unknown>; prototype: Record<string, unknown> };
const compilers = env as unknown as { Compiler: CompilerClass; JavaScriptCompiler: CompilerClass };
const BaseAst = compilers.Compiler;
const BaseJs = compilers.JavaScriptCompiler;
class BudgetAst extends BaseAst {}
Object.assign(BudgetAst.prototype, {
  compiler: BudgetAst,
  BlockStatement(this: { opcodes: Opcode[] }, block: unknown) {
    (BaseAst.prototype.BlockStatement as (b: unknown) => void).call(this, block);
    const last = this.opcodes.at(-1);
    if (last?.opcode === 'append') last.opcode = 'appendBlock';
  },
});
class BudgetJs extends BaseJs {}
Object.assign(BudgetJs.prototype, {
  compiler: BudgetJs,
  appendBlock(this: { uncharged?: boolean }) {
    this.uncharged = true;
    try {
      (BaseJs.prototype.append as () => void).call(this);
    } finally {
      this.uncharged = false;
    }
  },
  appendEscaped(this: { aliasable(name: string): unknown; popStack(): unknown; pushSource(s: unknown): void; appendToBuffer(...a: unknown[]): unknown }) {
    this.pushSource(this.appendToBuffer([this.aliasable(`container.helpers[${JSON.stringify(CHARGE_HELPER)}].escape`), '(', this.popStack(), ')']));
  },
  appendToBuffer(this: { uncharged?: boolean; aliasable(name: string): unknown }, source: unknown, location: unknown, explicit: unknown) {
    const wrapped = this.uncharged ? source : [this.aliasable(`container.helpers[${JSON.stringify(CHARGE_HELPER)}].charge`), '(', ...(Array.isArray(source) ? source : [source]), ')'];
    return (BaseJs.prototype.appendToBuffer as (...a: unknown[]) => unknown).call(this, wrapped, location, explicit);
  },
});
compilers.Compiler = BudgetAst;
compilers.JavaScriptCompiler = BudgetJs;

export type Compiled = (values: Values) => string;

/**
 * A part compiled, and what it costs to keep: its source and the generated code, in bytes (the
 * cache of compiled templates is bounded by this).
 */
export type CompiledPart = { fn: Compiled; bytes: number; code: string };
export function compilePart(part: TemplatePart, source: string): CompiledPart {
  const code = env.precompile(source, compileOptions(part)) as unknown as string;
  return { fn: templateFromCode(code), bytes: source.length + code.length, code };
}

/**
 * What env.compile would do, from the generated code: a parse of JavaScript, not of the
 * template, so another thread can run a part compiled once elsewhere.
 */
export function templateFromCode(code: string): Compiled {
  const spec = new Function(`return ${code}`)() as TemplateSpecification;
  const fn = env.template(spec);
  return (values) => fn(values, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
}
type TemplateSpecification = Parameters<typeof env.template>[0];

type HelperOptions = { fn: (context: unknown, options?: unknown) => string } & Record<string, unknown>;
const builtinEach = env.helpers.each as (this: unknown, context: unknown, options: HelperOptions) => string;
env.registerHelper('each', function (this: unknown, context: unknown, options: HelperOptions) {
  const fn = options?.fn;
  if (!fn) return builtinEach.call(this, context, options);
  return builtinEach.call(this, context, {
    ...options,
    fn: (ctx: unknown, opts?: unknown) => {
      if (budget && ++budget.iterations > budget.maxIterations) throw new RenderTooLarge(budget.limit + 1);
      return fn(ctx, opts);
    },
  });
});

/**
 * Runs compiled parts with one shared budget of `limit` bytes of output. Throws RenderTooLarge
 * as soon as the output passes it, and TemplateRuntimeError for anything Handlebars throws.
 */
export function renderParts<T extends Partial<Record<TemplatePart, Compiled | null>>>(parts: T, values: Values, limit: number, maxIterations = MAX_ITERATIONS): { [K in keyof T]: string | null } {
  budget = { limit, used: 0, iterations: 0, maxIterations };
  try {
    const out = {} as Record<string, string | null>;
    for (const [name, fn] of Object.entries(parts) as [string, Compiled | null | undefined][]) {
      out[name] = fn ? fn(values) : null;
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
/** A string variable's value is at most 100 KB (UTF-8). */
export const MAX_STRING_VARIABLE_BYTES = 100 * 1024;

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
    if (typeof value === 'string' && Buffer.byteLength(value) > MAX_STRING_VARIABLE_BYTES) {
      problems.push({ key: v.key, type: 'string_too_long', msg: `Variable ${v.key} is over ${MAX_STRING_VARIABLE_BYTES} bytes` });
      continue;
    }
    values[v.key] = value as string | number;
  }
  return { values, problems };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
