/**
 * Every error status a handler can raise is one its operation declares. Codes and their statuses are
 * held together at compile time (CodeFor<S> in src/errors/api-error.ts); which operation may answer
 * which status is checked here, statically, with the TypeScript compiler: from each handler (the
 * property named by its operationId in a `Handlers` object) every call is followed into the functions
 * and methods of src/ it reaches (an interface method into each class of src/ that implements it), and
 * every expression typed `ApiError<S>` with a literal S (`new ApiError(404, ...)`, `notFound(...)`,
 * `otherWorkspace(...)`, ...) counts as a status the operation can answer. The runtime response check
 * (src/http/response-check.ts) still checks every response the tests provoke; this check covers the
 * paths no test takes. What it cannot see: functions reached only as values passed in (callbacks), and
 * statuses computed at run time (`ApiError<number>`), which it lists so each has a reason below.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import ts from 'typescript';
import { Contract } from '../../src/http/contract.js';

const root = path.resolve(import.meta.dirname, '../..');
const srcDir = path.join(root, 'src') + path.sep;

/**
 * Functions that make an error whose status is not a literal, and why the operations reaching them
 * are covered all the same.
 */
const COMPUTED: Record<string, number[]> = {
  // The same error with a param: its status was counted where it was made.
  withParam: [],
};

function loadProgram(): ts.Program {
  const configFile = ts.readConfigFile(path.join(root, 'tsconfig.json'), (f) => ts.sys.readFile(f));
  const parsed = ts.parseJsonConfigFileContent(configFile.config, ts.sys, root);
  return ts.createProgram({ rootNames: parsed.fileNames.filter((f) => f.startsWith(srcDir)), options: { ...parsed.options, noEmit: true } });
}

type FunctionLike = ts.FunctionLikeDeclaration & { body?: ts.Node };

class StatusFinder {
  private readonly checker: ts.TypeChecker;
  private readonly memo = new Map<ts.Node, Map<number, string>>();
  private readonly implementations = new Map<string, ts.ClassDeclaration[]>();
  readonly computed = new Map<string, Set<string>>();

  constructor(private readonly program: ts.Program) {
    this.checker = program.getTypeChecker();
    const implementations = this.implementations;
    for (const file of this.sourceFiles()) {
      file.forEachChild(function visit(node): void {
        if (ts.isClassDeclaration(node)) {
          for (const t of (node.heritageClauses ?? []).flatMap((c) => c.types)) {
            const name = t.expression.getText();
            implementations.set(name, [...(implementations.get(name) ?? []), node]);
          }
        }
        node.forEachChild(visit);
      });
    }
  }

  /** An object literal typed as `Handlers` (src/contract/handlers.ts). */
  isHandlers(obj: ts.ObjectLiteralExpression): boolean {
    return this.checker.getContextualType(obj)?.aliasSymbol?.getName() === 'Handlers';
  }

  /** The string literals an expression's type holds (a const's literal type, or a union of them). */
  stringLiterals(node: ts.Node): string[] {
    const type = this.checker.getTypeAtLocation(node);
    return (type.isUnion() ? type.types : [type]).filter((t) => t.isStringLiteral()).map((t) => (t as ts.StringLiteralType).value);
  }

  sourceFiles(): ts.SourceFile[] {
    return this.program.getSourceFiles().filter((f) => f.fileName.startsWith(srcDir));
  }

  /**
   * The statuses of an `ApiError<S>` type: S's literals (a union gives several), nothing for a type
   * parameter (the caller's literal counts), NaN for `number`; null when it is not an ApiError.
   */
  private statusesOfType(type: ts.Type): number[] | null {
    const parts = type.isUnion() ? type.types : [type];
    const out: number[] = [];
    for (const part of parts) {
      if (part.getSymbol()?.getName() !== 'ApiError') continue;
      const [arg] = this.checker.getTypeArguments(part as ts.TypeReference);
      if (!arg || arg.flags & ts.TypeFlags.TypeParameter) continue;
      for (const s of arg.isUnion() ? arg.types : [arg]) out.push(s.isNumberLiteral() ? s.value : NaN);
    }
    return out.length || parts.some((p) => p.getSymbol()?.getName() === 'ApiError') ? out : null;
  }

  /** The declarations with a body that a call can run: the function or method, or each implementation of an interface method. */
  private targets(call: ts.CallExpression): FunctionLike[] {
    const decl: ts.Node | undefined = this.checker.getResolvedSignature(call)?.getDeclaration();
    if (!decl || !decl.getSourceFile().fileName.startsWith(srcDir)) return [];
    if ((decl as FunctionLike).body) return [decl as FunctionLike];
    if (ts.isMethodSignature(decl) && ts.isInterfaceDeclaration(decl.parent)) {
      const name = decl.name.getText();
      return (this.implementations.get(decl.parent.name.text) ?? []).flatMap((cls) =>
        cls.members.filter((m): m is ts.MethodDeclaration => ts.isMethodDeclaration(m) && m.name.getText() === name && Boolean(m.body)),
      );
    }
    return [];
  }

  private calleeName(call: ts.CallExpression | ts.NewExpression): string {
    const e = call.expression;
    return ts.isPropertyAccessExpression(e) ? e.name.text : e.getText();
  }

  /**
   * Every status reachable from a node, its own `ApiError<S>` expressions and those of what it calls,
   * each with one way it is reached (`fn -> fn -> file:line`), for the failure message.
   */
  statuses(node: ts.Node, where: string, visiting = new Set<ts.Node>()): Map<number, string> {
    const cached = this.memo.get(node);
    if (cached) return cached;
    if (visiting.has(node)) return new Map();
    visiting.add(node);
    const found = new Map<number, string>();
    const visit = (n: ts.Node): void => {
      if (ts.isCallExpression(n) || ts.isNewExpression(n)) {
        const statuses = this.statusesOfType(this.checker.getTypeAtLocation(n));
        const name = this.calleeName(n);
        for (const s of statuses ?? []) {
          if (!Number.isNaN(s)) {
            if (!found.has(s)) found.set(s, `${name} at ${position(n)}`);
          } else if (!COMPUTED[name]) {
            const set = this.computed.get(where) ?? new Set<string>();
            this.computed.set(where, set.add(`${position(n)} ${name}`));
          }
        }
        if (ts.isCallExpression(n)) {
          for (const target of this.targets(n)) {
            for (const [s, how] of this.statuses(target, where, visiting)) if (!found.has(s)) found.set(s, `${name} -> ${how}`);
          }
        }
      }
      n.forEachChild(visit);
    };
    visit((node as FunctionLike).body ?? node);
    visiting.delete(node);
    this.memo.set(node, found);
    return found;
  }
}

function position(n: ts.Node): string {
  const file = n.getSourceFile();
  return `${path.relative(root, file.fileName)}:${file.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
}

/**
 * Each handler: the property of a `Handlers` object named by an operationId, and its function. Carrier
 * callbacks are registered per plug-in (src/calls/routes.ts `carrierCallbackRoutes`: `handlers[operation]
 * = fn` for each id in a plug-in's `operations`), so the ids of every `operations: [...]` array of
 * src/carriers/ are handled by the function assigned that way in a function returning `Handlers`.
 */
function handlers(finder: StatusFinder, operationIds: Set<string>): Map<string, ts.Node> {
  const out = new Map<string, ts.Node>();
  const pluginOperations = new Set<string>();
  let perPlugin: ts.Node | undefined;
  for (const file of finder.sourceFiles()) {
    const inCarriers = file.fileName.startsWith(path.join(srcDir, 'carriers') + path.sep);
    file.forEachChild(function visit(node): void {
      if ((ts.isPropertyAssignment(node) || ts.isMethodDeclaration(node)) && ts.isObjectLiteralExpression(node.parent) && finder.isHandlers(node.parent)) {
        const name = node.name.getText().replace(/^['"]|['"]$/g, '');
        if (operationIds.has(name)) {
          assert.ok(!out.has(name), `${name} has two handlers`);
          out.set(name, ts.isPropertyAssignment(node) ? node.initializer : node);
        }
      }
      if (inCarriers && ts.isPropertyAssignment(node) && node.name.getText() === 'operations' && ts.isArrayLiteralExpression(node.initializer)) {
        for (const id of node.initializer.elements.flatMap((e) => finder.stringLiterals(e))) pluginOperations.add(id);
      }
      if (
        ts.isBinaryExpression(node) &&
        node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
        ts.isElementAccessExpression(node.left) &&
        (ts.isArrowFunction(node.right) || ts.isFunctionExpression(node.right)) &&
        returnsHandlers(node)
      ) {
        assert.ok(!perPlugin, `two per-plug-in handlers: ${position(node)}`);
        perPlugin = node.right;
      }
      node.forEachChild(visit);
    });
  }
  for (const id of pluginOperations) {
    if (!operationIds.has(id) || out.has(id)) continue;
    assert.ok(perPlugin, `${id} is a carrier plug-in's operation, and no function registers plug-ins' handlers`);
    out.set(id, perPlugin);
  }
  return out;
}

/** Whether the function `node` is in declares that it returns `Handlers`. */
function returnsHandlers(node: ts.Node): boolean {
  for (let n = node.parent; n; n = n.parent) {
    if (ts.isFunctionDeclaration(n) || ts.isFunctionExpression(n) || ts.isArrowFunction(n) || ts.isMethodDeclaration(n)) {
      return n.type?.getText() === 'Handlers';
    }
  }
  return false;
}

describe('statuses a handler can raise', () => {
  const contract = Contract.load();
  const finder = new StatusFinder(loadProgram());
  const found = handlers(finder, new Set(contract.operations.keys()));

  it('every operation of the contract has its handler in src/', () => {
    assert.deepEqual(
      [...contract.operations.keys()].filter((id) => !found.has(id)),
      [],
    );
  });

  it("are declared by the handler's operation", () => {
    const problems: string[] = [];
    for (const [operationId, fn] of found) {
      const declared = new Set(contract.operations.get(operationId)!.statuses);
      for (const [s, how] of finder.statuses(fn, operationId)) {
        if (!declared.has(String(s)) && !declared.has(`${String(s)[0]}XX`) && !declared.has('default'))
          problems.push(`${operationId} can answer ${s}, which it does not declare: ${how}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('have a literal status, or one this test knows the range of', () => {
    assert.deepEqual(Object.fromEntries([...finder.computed].map(([k, v]) => [k, [...v]])), {});
  });
});
