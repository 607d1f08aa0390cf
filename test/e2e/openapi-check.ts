/**
 * Checks real answers against the OpenAPI document the server itself serves: every schema in it (responses, error
 * answers, request bodies) must compile as JSON Schema 2020-12 (the dialect OpenAPI 3.1 embeds), and a response
 * body must match the schema documented for its method, path template and status. Also lists the routes a fastify
 * instance registered, to hold the document to them. Uses fastify's own Ajv (a dependency of fastify; nothing added).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

type Content = Record<string, { schema: object }>;
type Operation = { tags?: string[]; requestBody?: { content: Content }; responses: Record<string, { description: string; content?: Content }> };
export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, object> };
};

export class OpenApiCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly doc: OpenApiDocument) {
    this.ajv.addSchema({ $id: 'berth:components', $defs: doc.components.schemas });
  }

  /** Compiles every request and response schema of the document; throws on the first that is not valid. */
  compileAll(): number {
    let count = 0;
    for (const [path, operations] of Object.entries(this.doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        for (const status of Object.keys(op.responses)) if (this.validator(method, path, status)) count++;
        for (const { schema } of Object.values(op.requestBody?.content ?? {})) {
          this.compile(schema);
          count++;
        }
      }
    }
    return count;
  }

  /** `METHOD /path/{param}` of every operation in the document. */
  operations(): string[] {
    return Object.entries(this.doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`));
  }

  /** Throws when `body` does not match the documented JSON response of `method path` with `status`. */
  expect(method: string, template: string, status: number, body: unknown): void {
    const validate = this.validator(method.toLowerCase(), template, String(status));
    if (!validate) throw new Error(`${method} ${template} documents no JSON answer with status ${status}`);
    if (!validate(body)) {
      throw new Error(`${method} ${template} ${status} does not match its documented schema: ${this.ajv.errorsText(validate.errors)}`);
    }
  }

  private validator(method: string, path: string, status: string): ValidateFunction | undefined {
    const key = `${method} ${path} ${status}`;
    if (this.compiled.has(key)) return this.compiled.get(key);
    const schema = this.doc.paths[path]?.[method]?.responses[status]?.content?.['application/json']?.schema;
    if (!schema) return undefined;
    const validate = this.compile(schema);
    this.compiled.set(key, validate);
    return validate;
  }

  private compile(schema: object): ValidateFunction {
    return this.ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"berth:components#/$defs/')));
  }
}

/**
 * `METHOD /path/{param}` of every route fastify registered, read from its route tree (`printRoutes`): each line is a
 * path segment below its parent's (four columns a level), with the methods it answers in parentheses.
 */
export function registeredRoutes(tree: string): string[] {
  const prefixes: string[] = [];
  const routes: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ├└─]*)(\S.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    const path = (prefixes[depth - 1] ?? '') + match[2]!;
    prefixes[depth] = path;
    // A `{path}` at the end of a template is registered as a wildcard (content-plugin.ts): the rest of the URL.
    const template = path.replace(/:(\w+)/g, '{$1}').replace(/\/?\*$/, '/{path}');
    for (const method of match[3]?.split(', ') ?? []) routes.push(`${method} ${template}`);
  }
  return routes;
}
