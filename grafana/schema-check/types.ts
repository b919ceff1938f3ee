// Types the generated checks use, all derived from Grafana's published schema
// (@grafana/schema) except PromQuery and PromAnnotationQuery, which
// @grafana/schema does not publish.
import type {
  AnnotationQuery,
  Dashboard,
  DataQuery,
  FieldConfig,
  FieldConfigSource,
  Panel,
} from '@grafana/schema';

/**
 * The JSON form of a schema type. @grafana/schema declares several fields as
 * TypeScript string enums (ThresholdsMode, MappingType, VizOrientation, ...),
 * and TypeScript never lets a string literal stand for a string-enum member,
 * although the JSON file holds exactly those strings. AsJson<T> replaces each
 * string enum by the union of its values (`${E}`) and leaves every other
 * type, required and optional field as it is, recursively.
 */
export type AsJson<T> = T extends string
  ? string extends T
    ? string
    : `${T}`
  : T extends number | boolean | bigint | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<AsJson<U>>
      : T extends object
        ? { [K in keyof T]: AsJson<T[K]> }
        : T;

/**
 * A Prometheus query target as Grafana's Prometheus data source saves it
 * (PromQuery in Grafana's @grafana/prometheus, which is not part of
 * @grafana/schema): the common DataQuery fields plus the Prometheus ones.
 */
export interface PromQuery extends DataQuery {
  expr: string;
  legendFormat?: string;
  format?: 'time_series' | 'table' | 'heatmap';
  instant?: boolean;
  range?: boolean;
  exemplar?: boolean;
  interval?: string;
  intervalFactor?: number;
  editorMode?: 'code' | 'builder';
}

/**
 * A panel whose `options` and `fieldConfig.defaults.custom` are checked
 * against the panel plugin's own schema (Options and FieldConfig of
 * @grafana/schema's raw/composable/<plugin>/panelcfg), and whose queries are
 * Prometheus queries. The plain Panel type leaves options as
 * Record<string, unknown>.
 */
export type TypedPanel<TOptions, TCustom> = Omit<Panel, 'options' | 'fieldConfig' | 'targets'> & {
  options?: TOptions;
  fieldConfig?: Omit<FieldConfigSource, 'defaults'> & {
    defaults: Omit<FieldConfig, 'custom'> & { custom?: TCustom };
  };
  targets?: PromQuery[];
};

/**
 * A Prometheus annotation as Grafana's Prometheus data source saves it
 * (AnnotationQuery<PromQuery> plus the options its annotation editor keeps
 * beside the query; @grafana/schema's AnnotationQuery knows neither).
 */
export interface PromAnnotationQuery extends Omit<AnnotationQuery, 'target'> {
  target?: PromQuery;
  titleFormat?: string;
  textFormat?: string;
  tagKeys?: string;
  useValueForTime?: boolean;
}

/** A dashboard whose annotations may be Prometheus annotations. */
export type PromDashboard = Omit<Dashboard, 'annotations'> & {
  annotations?: { list?: Array<AnnotationQuery | PromAnnotationQuery> };
};
