/**
 * One source per concept: the output streams and the execution statuses are spelled once, as zod enums in
 * schemas/output.ts and schemas/states.ts, and everything else takes them from there; machine helpers read an actor
 * view, so nobody forges a snapshot; projections fold typed events. Walks src/ and schemas/ and names file:line.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { outputStreams } from '../../schemas/output.ts';
import { executionStatusSchema } from '../../schemas/states.ts';
import { sourceFiles } from '../fixtures/source-files.ts';

const ROOT = join(import.meta.dirname, '../..');
/** Where each concept is written down. */
const SOURCES = new Set([join(ROOT, 'schemas/output.ts'), join(ROOT, 'schemas/states.ts')]);
const CONCEPTS: [string, ReadonlySet<string>][] = [
  ['the output streams', new Set(outputStreams)],
  ['the execution statuses', new Set(executionStatusSchema.options)],
];

/** The strings a list literal or a union type spells, or undefined when it is not made of string literals only. */
function spelledStrings(node: ts.Node): string[] | undefined {
  const members: readonly ts.Node[] = ts.isArrayLiteralExpression(node) ? node.elements : ts.isUnionTypeNode(node) ? node.types : [];
  const strings = members.map((m) => {
    const literal = ts.isLiteralTypeNode(m) ? m.literal : m;
    return ts.isStringLiteral(literal) ? literal.text : undefined;
  });
  return strings.length > 0 && strings.every((s) => s !== undefined) ? (strings as string[]) : undefined;
}

/** Each place in `text` that spells a concept again, forges a snapshot, or folds untyped event data: `line: what`. */
export function conceptOffences(fileName: string, text: string): string[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const projection = fileName.includes(`${join('src', 'projections')}`);
  const found: string[] = [];
  const at = (node: ts.Node, what: string) => found.push(`${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}: ${what}`);
  const visit = (node: ts.Node): void => {
    const strings = spelledStrings(node);
    for (const [name, values] of CONCEPTS) {
      if (strings && [...values].every((v) => strings.includes(v))) at(node, `spells ${name} again: ${node.getText(file)}`);
    }
    // An object literal made into a snapshot (converting XState's own persisted snapshot is not forging one).
    if (ts.isAsExpression(node) && ts.isAsExpression(node.expression) && node.expression.type.kind === ts.SyntaxKind.UnknownKeyword &&
      ts.isObjectLiteralExpression(node.expression.expression) && /Snapshot\b/.test(node.type.getText(file))) {
      at(node, `forges a snapshot: ${node.getText(file)}`);
    }
    if (projection && ts.isTypeReferenceNode(node) && node.getText(file).replace(/\s/g, '') === 'Record<string,any>') {
      at(node, 'folds event data typed Record<string, any>');
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('one source per concept', () => {
  it('spells the output streams and the execution statuses only in schemas/, forges no snapshot, folds typed events', () => {
    const files = [...sourceFiles(join(ROOT, 'src'), SOURCES), ...sourceFiles(join(ROOT, 'schemas'), SOURCES)];
    const offences = files.flatMap((path) => conceptOffences(path, readFileSync(path, 'utf8')).map((o) => `${relative(ROOT, path)}:${o}`));
    expect(offences).toEqual([]);
  });

  it('finds each kind of offence it looks for (the check itself can fail)', () => {
    const sample = [
      "const s: OutputStream[] = ['stdout', 'stderr', 'pty'];",
      "type S = 'accepted' | 'running' | 'exited' | 'cancelled' | 'failed' | 'unknown';",
      'const x = executionStatus({ value: v.state, context: v.context } as unknown as ExecutionSnapshot);',
      'type Data = Record<string, any>;',
    ].join('\n');
    expect(conceptOffences(join(ROOT, 'src/projections/sample.projection.ts'), sample).map((o) => o.split(':')[0])).toEqual(['1', '2', '3', '4']);
    // A subset is a choice, not the concept: `tty ? ['pty'] : ['stdout', 'stderr']`.
    expect(conceptOffences('src/cli/sample.ts', "const pick = tty ? ['pty'] : ['stdout', 'stderr'];")).toEqual([]);
  });
});
