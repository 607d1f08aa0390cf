/** Types of parse-prometheus-text-format (it ships none): the families of a Prometheus text exposition. */
declare module 'parse-prometheus-text-format' {
  export interface ParsedFamily {
    name: string;
    /** '' when the family has no HELP line. */
    help: string;
    /** Upper case; 'UNTYPED' when the family has no TYPE line. */
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: { labels?: Record<string, string>; value?: string }[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
