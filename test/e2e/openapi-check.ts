/**
 * Checks real answers against the OpenAPI document the server itself serves: every schema in it must compile as
 * JSON Schema 2020-12 (the dialect OpenAPI 3.1 embeds), and a response body must match the schema documented for
 * its method, path template and status. Uses fastify's own Ajv (a dependency of fastify; nothing added).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

type Operation = { responses: Record<string, { content?: Record<string, { schema: object }> }> };
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
      }
    }
    return count;
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
    const text = JSON.stringify(schema).replaceAll('"#/components/schemas/', '"berth:components#/$defs/');
    const validate = this.ajv.compile(JSON.parse(text));
    this.compiled.set(key, validate);
    return validate;
  }
}
