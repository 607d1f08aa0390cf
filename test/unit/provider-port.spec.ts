/**
 * Nothing above src/providers names a provider kind (DESIGN §2): what differs per provider is a capability of the
 * port. Walks every source file outside src/providers and fails, naming file:line, on a kind literal, a comparison
 * or switch on a `provider` field, or an `instanceof` of a provider class. The kinds profiles may name are exactly
 * the ones the composition root registers.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { providerKindSchema } from '../../schemas/profile.ts';
import { defaultProviders } from '../../src/runtime/berth.ts';
import { ProviderRegistry } from '../../src/runtime/provider-registry.ts';
import { sourceFiles } from '../fixtures/source-files.ts';

const ROOT = join(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');
/** The port and its adapters: the one place that may know each kind. */
const EXEMPT = new Set([join(SRC, 'providers')]);
const KINDS = new Set<string>(providerKindSchema.options);
const EQUALITY = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);

/** `x.provider` or a bare `provider`: what a kind is read from. */
const namesProviderField = (node: ts.Node): boolean =>
  (ts.isPropertyAccessExpression(node) && node.name.text === 'provider') || (ts.isIdentifier(node) && node.text === 'provider');

/** Each place in `text` that branches on, or spells, a provider kind: `line: what`. */
export function kindUses(fileName: string, text: string): string[] {
  const file = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (node: ts.Node, what: string) => found.push(`${file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1}: ${what}`);
  const visit = (node: ts.Node): void => {
    if ((ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) && KINDS.has(node.text) && !ts.isImportDeclaration(node.parent)) {
      at(node, `names the provider kind '${node.text}'`);
    } else if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InstanceOfKeyword && /Provider$/.test(node.right.getText(file))) {
      at(node, `instanceof ${node.right.getText(file)}`);
    } else if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind) && (namesProviderField(node.left) || namesProviderField(node.right))) {
      at(node, `compares a provider kind: ${node.getText(file)}`);
    } else if (ts.isSwitchStatement(node) && namesProviderField(node.expression)) {
      at(node, `switches on a provider kind: ${node.expression.getText(file)}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('the provider port', () => {
  it('is the only place that names a provider kind: no kind literal, kind comparison or provider instanceof outside src/providers', () => {
    const offences = sourceFiles(SRC, EXEMPT).flatMap((path) => kindUses(path, readFileSync(path, 'utf8')).map((use) => `${relative(ROOT, path)}:${use}`));
    expect(offences).toEqual([]);
  });

  it('catches each shape a kind check took before the port had the capability', () => {
    const shapes = [
      "if (profile.provider !== 'docker' || !content) return {};",
      "const ownership = profile.provider === 'native' ? 'borrowed' : 'managed';",
      "const reuse = profile.reuse ?? (profile.provider === 'docker' ? 'session' : 'scope');",
      "return a?.context.profile.provider === 'docker' ? a.context.contentVersion : active;",
      'if (provider instanceof DockerProvider) run();',
      'switch (env.profile.provider) { default: }',
      'if (provider === KIND_OF_CONTAINERS) run();',
      "type Kind = 'native' | 'docker';",
    ];
    for (const shape of shapes) expect(kindUses('shape.ts', shape), shape).not.toEqual([]);
    expect(kindUses('fine.ts', "providers.get(profile.provider).ownership === 'borrowed'; use.kind === 'execution';")).toEqual([]);
  });

  it('lets profiles name exactly the kinds the composition root registers', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'berth-provider-port-'));
    const registry = new ProviderRegistry(defaultProviders(dataDir, {}));
    try {
      expect(registry.kinds().sort()).toEqual([...providerKindSchema.options].sort());
    } finally {
      await registry.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
